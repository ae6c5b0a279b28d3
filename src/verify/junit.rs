//! JUnit XML, the format GitHub Actions, GitLab and Jenkins render: a
//! `<testsuite>` per file and scenario, a `<testcase>` per assertion with its
//! time, and a `<failure>` (or `<error>`, when nothing could be measured)
//! whose message holds the measured value and the expectation; a
//! `<skipped>` whose message says which host checks an assertion not checked
//! on this host's part. Written by
//! quick-junit, which escapes and lays out the XML.

use super::{Outcome, Suite};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::time::Duration;

/// The report of every suite run, as XML text.
pub fn junit(suites: &[Suite]) -> Result<String, quick_junit::SerializeError> {
    let mut report = Report::new("tunbench test");
    let mut total = 0.0;
    for s in suites {
        let name = s.name();
        let mut suite = TestSuite::new(name.clone());
        for v in &s.verdicts {
            let status = match v.outcome {
                Outcome::Pass => TestCaseStatus::success(),
                Outcome::Skipped => {
                    let mut st = TestCaseStatus::skipped();
                    st.set_message(v.measured.clone());
                    st.set_type(v.kind);
                    st
                }
                Outcome::Fail | Outcome::Error => {
                    let kind = if v.outcome == Outcome::Fail {
                        NonSuccessKind::Failure
                    } else {
                        NonSuccessKind::Error
                    };
                    let mut st = TestCaseStatus::non_success(kind);
                    st.set_message(format!("measured {}, expected {}", v.measured, v.expected));
                    st.set_type(v.kind);
                    st
                }
            };
            let mut case = TestCase::new(v.name.clone(), status);
            case.set_classname(name.clone());
            case.set_time(Duration::from_secs_f64(v.seconds));
            suite.add_test_case(case);
        }
        suite.set_time(Duration::from_secs_f64(s.seconds));
        if let Some(e) = &s.error {
            suite.set_system_err(e.clone());
        }
        total += s.seconds;
        report.add_test_suite(suite);
    }
    report.set_time(Duration::from_secs_f64(total));
    report.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Verdict;

    fn verdict(name: &str, outcome: Outcome) -> Verdict {
        Verdict {
            name: name.into(),
            kind: "path_mtu",
            outcome,
            measured: "1400 bytes <to> \"x\" & y".into(),
            expected: "1500 bytes".into(),
            seconds: 0.25,
        }
    }

    /// Read back with an XML parser: the elements and attributes the JUnit
    /// schema requires, one <failure> or <error> per assertion that did not
    /// hold, and text that needs escaping escaped.
    #[test]
    fn the_xml_has_what_the_junit_schema_requires() {
        let suites = vec![
            Suite {
                file: "topologies/dslite.toml".into(),
                scenario: Some("kernel".into()),
                lab: "as".into(),
                verdicts: vec![
                    verdict("a", Outcome::Pass),
                    verdict("b", Outcome::Fail),
                    verdict("c", Outcome::Error),
                    Verdict {
                        measured: "left to host router, which holds nvr".into(),
                        ..verdict("s", Outcome::Skipped)
                    },
                ],
                seconds: 1.5,
                error: None,
            },
            Suite {
                file: "two.toml".into(),
                scenario: None,
                lab: "as-2".into(),
                verdicts: vec![verdict("d", Outcome::Error)],
                seconds: 0.5,
                error: Some("lab as-2 did not come up".into()),
            },
        ];
        let xml = junit(&suites).unwrap();
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "testsuites");
        assert_eq!(root.attribute("tests"), Some("5"));
        assert_eq!(root.attribute("failures"), Some("1"));
        assert_eq!(root.attribute("errors"), Some("2"));
        assert_eq!(root.attribute("skipped"), Some("1"));
        let s: Vec<_> = root.children().filter(|n| n.is_element()).collect();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].attribute("name"), Some("dslite.toml:kernel"));
        assert_eq!(s[1].attribute("name"), Some("two.toml"));
        for suite in &s {
            assert_eq!(suite.tag_name().name(), "testsuite");
            for a in ["name", "tests", "failures", "errors", "time"] {
                assert!(suite.attribute(a).is_some(), "testsuite without {a}");
            }
            for case in suite.children().filter(|n| n.is_element()) {
                if case.has_tag_name("system-err") {
                    assert_eq!(case.text(), Some("lab as-2 did not come up"));
                    continue;
                }
                assert_eq!(case.tag_name().name(), "testcase");
                for a in ["name", "classname", "time"] {
                    assert!(case.attribute(a).is_some(), "testcase without {a}");
                }
            }
        }
        let case = |name: &str| {
            doc.descendants()
                .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(name))
                .unwrap()
        };
        assert!(case("a").children().all(|n| !n.is_element()));
        let f = case("b")
            .children()
            .find(|n| n.has_tag_name("failure"))
            .unwrap();
        assert_eq!(
            f.attribute("message"),
            Some("measured 1400 bytes <to> \"x\" & y, expected 1500 bytes")
        );
        assert_eq!(f.attribute("type"), Some("path_mtu"));
        assert!(case("c").children().any(|n| n.has_tag_name("error")));
        let s = case("s")
            .children()
            .find(|n| n.has_tag_name("skipped"))
            .unwrap();
        assert_eq!(
            s.attribute("message"),
            Some("left to host router, which holds nvr")
        );
        assert_eq!(case("b").attribute("time"), Some("0.250"));
    }
}
