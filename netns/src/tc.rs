//! Traffic-control commands, run with iproute2's `tc -batch -` inside a lab
//! namespace: the classifier and action netlink attributes (u32 keys, mirred,
//! TBF rate tables) are tc's own formats, and the batch text doubles as the
//! dry-run output.

use crate::tool::Tool;

pub(crate) const TC: Tool = Tool {
    program: "tc",
    args: &["-batch", "-"],
    package: "iproute2",
    input: "the batch",
};

/// Runs `batch` (one tc command per line, without the leading `tc`) in
/// namespace `ns`. The error carries tc's own message.
pub fn run(ns: &str, batch: &str) -> Result<(), String> {
    TC.run_in(ns, batch)
}
