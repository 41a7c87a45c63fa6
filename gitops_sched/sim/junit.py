"""JUnit XML of `gitops-sched test`, the report format CI systems (GitHub, GitLab, Jenkins)
show as test results.

One `<testsuite>` per Simulation document and one `<testcase>` per `expect:` step (named by
its step and line, with `file` and `line` attributes for annotations); a step that is not met
holds a `<failure>` listing each value that differs. A scenario without `expect:` steps is
one test case: it ran to its end. No times are written, so the same run gives the same file.
"""

from __future__ import annotations

import re
from xml.etree import ElementTree as ET

from gitops_sched.sim.scenarios import ScenarioResult, describe

SUITES_NAME = "gitops-sched test"
# What XML 1.0 cannot hold even escaped (ElementTree writes it as is: a file no parser reads)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def junit_xml(results: list[ScenarioResult]) -> str:
    """The results as a JUnit XML document (ElementTree escapes every name and message)."""
    root = ET.Element("testsuites", name=SUITES_NAME)
    for scenario in results:
        root.append(_suite(scenario))
    _counts(root, list(root.iter("testcase")))
    for element in root.iter():
        element.text = element.text and _xml_chars(element.text)
        for key, value in element.attrib.items():
            element.set(key, _xml_chars(value))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _suite(scenario: ScenarioResult) -> ET.Element:
    file = scenario.location.file
    suite = ET.Element("testsuite", name=scenario.ref, file=file)
    for expect in scenario.expectations:
        case = ET.SubElement(
            suite,
            "testcase",
            name=f"step {expect.step} expect (line {expect.location.line})",
            classname=scenario.ref,
            file=file,
            line=str(expect.location.line),
        )
        if expect.failures:
            message = f"{len(expect.failures)} of {expect.checked} expected values differ"
            failure = ET.SubElement(case, "failure", message=message, type="expectation")
            failure.text = "\n".join(describe(f) for f in expect.failures)
    if not scenario.expectations:
        ET.SubElement(
            suite,
            "testcase",
            name="runs to its end (no expect: steps)",
            classname=scenario.ref,
            file=file,
            line=str(scenario.location.line),
        )
    _counts(suite, list(suite.iter("testcase")))
    return suite


def _counts(element: ET.Element, cases: list[ET.Element]) -> None:
    failures = sum(case.find("failure") is not None for case in cases)
    element.set("tests", str(len(cases)))
    element.set("failures", str(failures))
    element.set("errors", "0")


def _xml_chars(text: str) -> str:
    """`text` with the characters XML cannot hold (control characters a file name or an
    expected value may carry) replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)
