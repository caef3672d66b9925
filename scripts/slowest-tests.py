#!/usr/bin/env python3
"""Prints the slowest tests of a cargo-nextest run, read from its JUnit report, so that a suite
that got slower shows which tests to look at. Standard library only.

Usage: scripts/slowest-tests.py [JUNIT_XML] [COUNT]
(default: target/nextest/ci/junit.xml, the `ci` profile's report, and 15).
"""

import sys
import xml.etree.ElementTree as ET


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "target/nextest/ci/junit.xml"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"slowest tests: cannot read the JUnit report {path}: {e}", file=sys.stderr)
        return 1
    tests = []
    for case in root.iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        binary = case.get("classname", "")
        tests.append((float(case.get("time", "0")), binary, case.get("name", "?"), failed))
    if not tests:
        print(f"slowest tests: no test cases in {path}", file=sys.stderr)
        return 1
    tests.sort(reverse=True)
    total = sum(t[0] for t in tests)
    print(f"The {min(count, len(tests))} slowest of {len(tests)} tests "
          f"({total:.0f} s of test time in all):")
    for seconds, binary, name, failed in tests[:count]:
        mark = "  FAILED" if failed else ""
        print(f"{seconds:8.1f} s  {binary} {name}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
