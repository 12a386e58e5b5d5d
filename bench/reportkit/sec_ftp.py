"""placeholder"""
SECTION = "ftp"


def run(ctx, results):
    results.note(SECTION, "not yet")
