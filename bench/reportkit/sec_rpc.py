"""placeholder"""
SECTION = "rpc"


def run(ctx, results):
    results.note(SECTION, "not yet")
