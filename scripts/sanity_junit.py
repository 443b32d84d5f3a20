"""Turn an ansible-test sanity run into one JUnit report: one test case per sanity test that ran.

ansible-test --junit writes files only for failing tests, so the list of tests that ran comes from
its log ("Running sanity test '<name>'"), and failures from its JUnit directory.
"""
import pathlib
import re
import sys
import xml.etree.ElementTree as ET


def main(log_path: str, junit_dir: str, out_path: str) -> int:
    ran = re.findall(r"""Running sanity test ["']([^"']+)["']""", pathlib.Path(log_path).read_text(errors="replace"))
    failed = {}
    for path in pathlib.Path(junit_dir).glob("*.xml") if pathlib.Path(junit_dir).is_dir() else []:
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed.setdefault(path.stem, []).append(case.get("name", ""))
    suite = ET.Element("testsuite", name="ansible-test-sanity", tests=str(len(ran)))
    failures = 0
    for name in ran:
        case = ET.SubElement(suite, "testcase", classname="sanity", name=name)
        hits = [k for k in failed if name in k]
        if hits:
            failures += 1
            ET.SubElement(case, "failure", message=f"{name} failed").text = "\n".join(sum((failed[k] for k in hits), []))
    suite.set("failures", str(failures))
    ET.ElementTree(suite).write(out_path, encoding="unicode")
    print(f"sanity: {len(ran)} tests ran, {failures} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
