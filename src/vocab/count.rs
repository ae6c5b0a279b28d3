//! Counts in prose: "1 link", "2 links".

/// `n` and `noun`, with the noun's plural (an added "s") unless `n` is 1.
pub fn counted(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::counted;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(counted(1u32, "link"), "1 link");
        assert_eq!(counted(0u32, "link"), "0 links");
        assert_eq!(counted(19u64, "route"), "19 routes");
    }
}
