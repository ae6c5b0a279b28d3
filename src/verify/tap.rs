//! TAP version 13 (testanything.org): one `ok` / `not ok` line per
//! assertion as it is made, a YAML block under a failure with what was
//! measured and expected, `# SKIP` and why after an assertion another host
//! checks, and the plan at the end (the count is known only once every suite
//! has run).

use super::{Outcome, Verdict};

/// A TAP stream being written.
#[derive(Debug, Default)]
pub struct Tap {
    count: usize,
}

impl Tap {
    pub fn header() -> &'static str {
        "TAP version 13\n"
    }

    /// The lines for one verdict of a suite.
    pub fn verdict(&mut self, suite: &str, v: &Verdict) -> String {
        self.count += 1;
        if v.outcome == Outcome::Skipped {
            // TAP's SKIP directive: not run here, neither passed nor failed.
            let why = v.measured.replace('#', "\\#");
            return format!("ok {} - {suite}: {} # SKIP {why}\n", self.count, v.name);
        }
        let ok = v.outcome == Outcome::Pass;
        let mut s = format!(
            "{} {} - {suite}: {}\n",
            if ok { "ok" } else { "not ok" },
            self.count,
            v.name
        );
        if !ok {
            let q = |x: &str| format!("'{}'", x.replace('\'', "''"));
            s += "  ---\n";
            s += &format!(
                "  severity: {}\n",
                if v.outcome == Outcome::Fail {
                    "fail"
                } else {
                    "error"
                }
            );
            s += &format!("  kind: {}\n", v.kind);
            s += &format!("  measured: {}\n", q(&v.measured));
            s += &format!("  expected: {}\n", q(&v.expected));
            s += &format!("  duration_ms: {:.0}\n", v.seconds * 1000.0);
            s += "  ...\n";
        }
        s
    }

    /// A comment line before a suite's verdicts.
    pub fn suite(&self, name: &str, lab: &str) -> String {
        format!("# {name} (lab {lab})\n")
    }

    /// The plan, last.
    pub fn plan(&self) -> String {
        format!("1..{}\n", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_13_lines_with_yaml_under_failures_and_the_plan_last() {
        let v = |name: &str, outcome| Verdict {
            name: name.into(),
            kind: "reach",
            outcome,
            measured: "no reply from 198.18.0.2".into(),
            expected: "a reply".into(),
            seconds: 0.5,
        };
        let mut t = Tap::default();
        let mut out = Tap::header().to_string();
        out += &t.suite("x.toml", "as");
        out += &t.verdict("x.toml", &v("up", Outcome::Pass));
        out += &t.verdict("x.toml", &v("it's", Outcome::Fail));
        out += &t.verdict(
            "x.toml",
            &Verdict {
                measured: "left to host router, which holds nvr".into(),
                ..v("far", Outcome::Skipped)
            },
        );
        out += &t.plan();
        assert_eq!(
            out,
            "TAP version 13\n\
             # x.toml (lab as)\n\
             ok 1 - x.toml: up\n\
             not ok 2 - x.toml: it's\n  \
             ---\n  \
             severity: fail\n  \
             kind: reach\n  \
             measured: 'no reply from 198.18.0.2'\n  \
             expected: 'a reply'\n  \
             duration_ms: 500\n  \
             ...\n\
             ok 3 - x.toml: far # SKIP left to host router, which holds nvr\n\
             1..3\n"
        );
    }
}
