#!/usr/bin/env python3
"""Checks the workspace's declared rust-version against what it builds.

Every crate of the workspace must inherit the workspace's rust-version, and
no dependency that `cargo build` compiles (normal and build dependencies, as
locked in Cargo.lock, for this machine's target) may need a newer Rust.
Clippy's incompatible_msrv lint (run with -D warnings by scripts/test.sh)
checks the workspace's own code against the same version. Dev-dependencies
are left out: they build only for the tests.
"""
import json
import subprocess
import sys


def version(text):
    return tuple(int(part) for part in text.split("."))


def host_target():
    out = subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout
    return next(line.split()[1] for line in out.splitlines() if line.startswith("host:"))


def main():
    metadata = json.loads(
        subprocess.run(
            [
                "cargo", "metadata", "--format-version", "1", "--locked",
                "--filter-platform", host_target(),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    packages = {p["id"]: p for p in metadata["packages"]}
    members = metadata["workspace_members"]
    problems = []

    declared = {packages[m]["rust_version"] for m in members}
    for m in members:
        if packages[m]["rust_version"] is None:
            problems.append(f"{packages[m]['name']} declares no rust-version "
                            "(add rust-version.workspace = true)")
    declared.discard(None)
    if len(declared) != 1:
        problems.append(f"the crates declare different rust-versions: {sorted(declared)}")
        print("\n".join(problems), file=sys.stderr)
        return 1
    declared = declared.pop()

    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    built = set()
    todo = list(members)
    while todo:
        node = nodes[todo.pop()]
        for dep in node["deps"]:
            kinds = {k["kind"] for k in dep["dep_kinds"]}
            if kinds & {None, "build"} and dep["pkg"] not in built:
                built.add(dep["pkg"])
                todo.append(dep["pkg"])

    built -= set(members)
    newest = max(
        (packages[p] for p in built if packages[p]["rust_version"]),
        key=lambda p: version(p["rust_version"]),
    )
    for p in sorted(built):
        needs = packages[p]["rust_version"]
        if needs and version(needs) > version(declared):
            problems.append(f"{packages[p]['name']} {packages[p]['version']} needs Rust {needs}, "
                            f"newer than the declared {declared}")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"rust-version {declared}: the newest a dependency needs is "
          f"{newest['rust_version']} ({newest['name']} {newest['version']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
