"""Fail unless the JUnit reports of a test run add up to at least one executed, passing test.

With --failures: print each failed test of the reports and the first lines of its message (make
test's last lines, what a CI page shows, when a suite of the compute lane failed)."""
import os
import pathlib
import re
import sys
import xml.etree.ElementTree as ET


def skip_reasons(root):
    """(test, reason) of every skipped or expected-to-fail test case, so no skip goes unseen."""
    for case in root.iter("testcase"):
        for skip in case.findall("skipped"):
            yield "%s::%s" % (case.get("classname", ""), case.get("name", "")), skip.get("message", "")


# Skip reason of the ClusterConfig tests when eksctl's schema file is missing (tests/support/eksctl.py).
# make test needs them run unless TRAINFLEET_REQUIRE_EKSCTL_SCHEMA=0.
SCHEMA_SKIP = "eksctl ClusterConfig schema missing"


def failures(report_dir: str, lines: int = 12) -> int:
    """Print each failed or erroring test case: its name, then the first `lines` lines of its message."""
    count = 0
    for path in sorted(pathlib.Path(report_dir).glob("*.xml")):
        for case in ET.parse(path).getroot().iter("testcase"):
            for problem in case.findall("failure") + case.findall("error"):
                count += 1
                print(f"{path.stem}: {problem.tag.upper()} {case.get('classname', '')}::{case.get('name', '')}")
                message = [line for line in (problem.get("message") or "").splitlines() if line.strip()]
                for line in message[:lines]:
                    print("  " + line[:200])
                # pytest's traceback names each place as "path.py:115: AssertionError": the last one
                # in this project's code (not a library's), else the last one.
                where = [line for line in (problem.text or "").splitlines() if re.match(r"^\S+\.py:\d+: ", line)]
                ours = [line for line in where if "site-packages" not in line]
                if where:
                    print("  at " + (ours or where)[-1][:200])
    if not count:
        print("no failed test in the reports (the suite failed before or outside its tests: see its output above)")
    return 0


def main(report_dir: str) -> int:
    total = failed = skipped = schema_skips = 0
    files = sorted(pathlib.Path(report_dir).glob("*.xml"))
    for path in files:
        root = ET.parse(path).getroot()
        for name, reason in skip_reasons(root):
            print(f"  skipped/xfail {name}: {reason}")
            schema_skips += reason.startswith(SCHEMA_SKIP)
        suites = [root] if root.tag == "testsuite" else root.iter("testsuite")
        for suite in suites:
            total += int(suite.get("tests", 0))
            failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            skipped += int(suite.get("skipped", 0))
        print(f"  {path.name}: {sum(int(s.get('tests', 0)) for s in ([root] if root.tag == 'testsuite' else root.iter('testsuite')))} tests")
    executed = total - skipped
    print(f"tests: {total} total, {executed} executed, {skipped} skipped, {failed} failed, {len(files)} reports")
    if not files or executed <= 0:
        print("no test was executed: failing the run", file=sys.stderr)
        return 1
    if schema_skips and os.environ.get("TRAINFLEET_REQUIRE_EKSCTL_SCHEMA", "1") != "0":
        print(f"{schema_skips} ClusterConfig schema tests were skipped (eksctl's schema is missing): failing the run",
              file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1] == "--failures":
        sys.exit(failures(sys.argv[2]))
    sys.exit(main(sys.argv[1]))
