//! Counts in prose: "1 link", "2 links".

/// `n` and `noun`, with the noun's plural unless `n` is 1: an added "es"
/// after a hissing end ("addresses", "switches"), else "s".
pub fn counted(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    let hissing = ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| noun.ends_with(e));
    let plural = match (n, hissing) {
        (1, _) => "",
        (_, true) => "es",
        (_, false) => "s",
    };
    format!("{n} {noun}{plural}")
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1u32, "link"), "1 link");
        assert_eq!(counted(0u32, "link"), "0 links");
        assert_eq!(counted(19u64, "route"), "19 routes");
        assert_eq!(counted(76u64, "address"), "76 addresses");
        assert_eq!(counted(1u64, "address"), "1 address");
        assert_eq!(counted(2u64, "switch"), "2 switches");
    }
}
