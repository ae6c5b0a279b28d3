//! How the reports write words: an error on one line, a list in a sentence,
//! the paths of a run.

use crate::measure::results::Results;

/// An error message on one line.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// "a", "a and b", "a, b and c".
pub(crate) fn words(v: &[String]) -> String {
    match v {
        [] => String::new(),
        [a] => a.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The labels of the run's paths, for an error that names an unknown one:
/// "raw, wg", or "(none)".
pub(crate) fn path_list(r: &Results) -> String {
    if r.paths.is_empty() {
        return "(none)".to_string();
    }
    r.paths
        .iter()
        .map(|p| p.label())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_lines() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(words(&v(&[])), "");
        assert_eq!(words(&v(&["a"])), "a");
        assert_eq!(words(&v(&["a", "b", "c"])), "a, b and c");
        assert_eq!(one_line("a:\n  b  c"), "a: b c");
        let mut r = crate::report::fixture::results();
        assert_eq!(path_list(&r), "raw, wg");
        r.paths.clear();
        assert_eq!(path_list(&r), "(none)");
    }
}
