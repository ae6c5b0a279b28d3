//! nftables rulesets, loaded with Debian's `nft` inside a lab namespace. The
//! nftables netlink protocol is large; `nft -f -` is its reference client, and
//! the ruleset text doubles as the dry-run output.

use crate::tool::Tool;

pub(crate) const NFT: Tool = Tool {
    program: "nft",
    args: &["-f", "-"],
    package: "nftables",
    input: "the ruleset",
};

/// Loads `ruleset` in namespace `ns` atomically (nft applies a file as one
/// transaction). The error carries nft's own message.
pub fn load(ns: &str, ruleset: &str) -> Result<(), String> {
    NFT.run_in(ns, ruleset)
}
