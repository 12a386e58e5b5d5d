"""placeholder"""
SECTION = "drpc"


def run(ctx, results):
    results.note(SECTION, "not yet")
