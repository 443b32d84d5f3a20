"""Fail unless the JUnit reports of a test run add up to at least one executed, passing test."""
import pathlib
import sys
import xml.etree.ElementTree as ET


def main(report_dir: str) -> int:
    total = failed = skipped = 0
    files = sorted(pathlib.Path(report_dir).glob("*.xml"))
    for path in files:
        root = ET.parse(path).getroot()
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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
