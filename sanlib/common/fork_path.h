// SAN_FORK_PATH: marks a function that a fork child runs at once, before it is back in the
// program: the fork handlers of the child and _exit.
//
// fork() copies no page-table entries for a mapping of a file that was never written (the
// library's code): the child faults in every page of code it runs, up to 16 pages at a time
// around the address (the kernel's fault-around), so each 64 KiB of the library the child passes
// through costs it a page fault. Spread over the library, the child's handlers cost a forking
// server's child seven of them (docs/compat.md, "What sanrun costs a process"). Functions marked
// here are laid out side by side: the linker's default script gathers every `.text.hot.*` input
// section into one run at the start of the library's code.
#pragma once

#define SAN_FORK_PATH __attribute__((section(".text.hot.san_fork")))
