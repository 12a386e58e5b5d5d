#!/usr/bin/env python3
"""The man pages (man/), written once and kept true: each renders with `man -l` without a
warning, and documents exactly what the program offers --
  * a program's page: the options of its OPTIONS (and COMMANDS) sections are those of its
    --help (every --long option named anywhere in --help, and every short option that begins one
    of its lines), no more, no fewer;
  * san(7): its SETTINGS are the SAN_* variables `sanrun --help` lists;
  * libsan(3), rpcvia(3): their SYNOPSIS declares every san_* / rpcvia_* function of the header.
Usage: man_pages_test.py MAN_DIR BIN_DIR SAN_H [RPCVIA_H]
"""
import os
import re
import subprocess
import sys

MAN_DIR, BIN_DIR, SAN_H = sys.argv[1:4]
RPCVIA_H = sys.argv[4] if len(sys.argv) > 4 else None
LONG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
failures = []


def render(page):
    env = dict(os.environ, LC_ALL="C", MANWIDTH="200", MANROFFOPT="-rHY=0")
    r = subprocess.run(["man", "--warnings", "-E", "ascii", "-l", os.path.join(MAN_DIR, page)],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0 or r.stderr.strip():
        failures.append(f"{page}: man -l: {r.stderr.strip() or r.returncode}")
    return r.stdout


def sections(text):
    """Rendered page -> {HEADING: text}; headings are the lines at column 0."""
    out, name = {}, None
    for line in text.splitlines():
        if line and not line[0].isspace() and line.strip() == line.strip().upper():
            name = line.strip()
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


def short_options(text, indent=None):
    found = set()
    for line in text.splitlines():
        stripped = line.lstrip()
        if indent is not None and len(line) - len(stripped) != indent:
            continue
        m = re.match(r"(-[A-Za-z][A-Za-z]*)", stripped)
        if m:
            found.add(m.group(1))
    return found


def help_text(program):
    path = os.path.join(BIN_DIR, program)
    r = subprocess.run([path, "--help"], capture_output=True, text=True)
    return r.stdout + r.stderr


def compare(page, what, documented, offered):
    if documented != offered:
        failures.append(f"{page}: {what} differ: only in the page {sorted(documented - offered)}, "
                        f"only in the program {sorted(offered - documented)}")


def check_program(page, program):
    if not os.path.exists(os.path.join(BIN_DIR, program)):
        print(f"{page}: {program} not built here; rendering only")
        render(page)
        return
    s = sections(render(page))
    body = s.get("OPTIONS", "") + s.get("COMMANDS", "")
    if not body:
        failures.append(f"{page}: no OPTIONS section")
    helped = help_text(program)
    offered = set(LONG.findall(helped)) | short_options(helped)
    documented = set(LONG.findall(body)) | short_options(body, indent=7)
    compare(page, "options", documented, offered)
    print(f"{page}: {len(documented)} options, as {program} --help")


def check_functions(page, header, prefix):
    s = sections(render(page))
    declared = set(re.findall(rf"\b({prefix}_[a-z_]+)\(", open(header).read()))
    documented = set(re.findall(rf"\b({prefix}_[a-z_]+)\(", s.get("SYNOPSIS", "")))
    compare(page, "functions", documented, declared)
    print(f"{page}: {len(documented)} functions, as {os.path.basename(header)}")


for page, program in [("sanrun.1", "sanrun"), ("sanstat.8", "sanstat"),
                      ("ftp_client.1", "ftp_client"), ("rpcgen_via.1", "rpcgen_via"),
                      ("ftpd.8", "ftpd"), ("drpc.1", "drpc"), ("drpcd.8", "drpcd")]:
    check_program(page, program)

settings_help = help_text("sanrun").split("Settings", 1)[-1]
offered = set(re.findall(r"^\s+(SAN_[A-Z_]+)", settings_help, re.M))
documented = set(re.findall(r"^\s{7}(SAN_[A-Z_]+)\s*$", sections(render("san.7")).get("SETTINGS", ""),
                            re.M))
compare("san.7", "settings", documented, offered)
print(f"san.7: {len(documented)} settings, as sanrun --help")

check_functions("libsan.3", SAN_H, "san")
if RPCVIA_H:
    check_functions("rpcvia.3", RPCVIA_H, "rpcvia")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
