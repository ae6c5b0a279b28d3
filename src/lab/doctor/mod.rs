//! `tunbench doctor`: what this machine and its kernel offer tunbench, found by
//! trying each kernel feature where nothing can see it (`netns::features`: a
//! thread's own network namespace, never named) and by looking for each
//! program tunbench runs; for each, what needs it and what tunbench does
//! without it. Needs no lab and leaves nothing behind.

mod kernel;
mod programs;
mod render;

pub use render::{json, text};

use netns::features::{Feature, Found};

/// Where a check's subject lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Kernel,
    Program,
}

/// One line of the doctor's report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// As every refusal names it (`netns::features::Feature::name`), or the
    /// program's name.
    pub name: String,
    pub kind: Kind,
    /// Whether every lab needs it.
    pub required: bool,
    pub available: bool,
    /// A program's version, as it prints it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// A kernel feature: what it is and the kernel option that gives it; a
    /// program: where it comes from.
    pub what: String,
    /// Why it is not available (what the kernel or the probe said), or where
    /// a program was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub needed_by: String,
    pub without: String,
}

impl Check {
    /// A probe that could not tell: available is false, but nothing was
    /// refused by the kernel.
    pub fn undetermined(&self) -> bool {
        !self.available
            && self
                .detail
                .as_deref()
                .is_some_and(|d| d.starts_with(UNKNOWN))
    }
}

/// How the detail of a probe that could not tell starts.
const UNKNOWN: &str = "could not tell: ";

/// Every kernel feature and every program, tried at once.
pub fn examine() -> Vec<Check> {
    let (kernel, programs) = std::thread::scope(|s| {
        let kernel = s.spawn(netns::features::probe_all);
        let programs = programs::checks();
        (kernel.join(), programs)
    });
    let kernel = kernel.unwrap_or_else(|_| {
        Feature::ALL
            .iter()
            .map(|&f| (f, Found::Unknown("the probe panicked".into())))
            .collect()
    });
    kernel
        .into_iter()
        .map(|(f, found)| kernel_check(f, found))
        .chain(programs)
        .collect()
}

/// A kernel feature's line, from what its probe found.
pub fn kernel_check(f: Feature, found: Found) -> Check {
    let (required, needed_by, without) = kernel::role(f);
    let (available, detail) = match found {
        Found::Present => (true, None),
        Found::Absent(why) => (false, Some(why)),
        Found::Unknown(why) => (false, Some(format!("{UNKNOWN}{why}"))),
    };
    Check {
        name: f.name().into(),
        kind: Kind::Kernel,
        required,
        available,
        version: None,
        what: format!("{}, {}", f.what(), f.requires()),
        detail,
        needed_by: needed_by.into(),
        without,
    }
}

/// Every name doctor lists, in its order: the kernel's features, then the
/// programs.
pub fn names() -> Vec<&'static str> {
    Feature::ALL
        .iter()
        .map(|f| f.name())
        .chain(programs::names())
        .collect()
}

/// 1 when something every lab needs is missing, else 0.
pub fn exit_code(checks: &[Check]) -> i32 {
    if checks.iter().any(|c| c.required && !c.available) {
        1
    } else {
        0
    }
}

/// The running kernel's release ("6.1.0-18-amd64").
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
}
