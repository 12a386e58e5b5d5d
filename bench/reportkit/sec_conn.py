"""placeholder"""
SECTION = "conn"


def run(ctx, results):
    results.note(SECTION, "not yet")
