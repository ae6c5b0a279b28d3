//! Topology files: raw serde structs -> resolve (defaults, names, addresses) ->
//! validate. All of it is pure: nothing here touches the kernel.

pub mod assertion;
mod device;
pub mod hosts;
pub mod impair;
pub mod kernel;
pub mod locate;
pub mod profile_file;
pub mod raw;
pub mod reference;
mod resolve;
pub mod resolved;
pub mod scenario;
pub mod tunnel;
mod validate;

#[cfg(test)]
mod tests;

pub use device::absolute_profile_paths;
pub use resolved::{Endpoint, Interface, Link, Measurement, Node, NodeKind, Route, Topology};

use std::fmt;
use std::path::{Path, PathBuf};

/// A path to a value in the topology file, e.g. `links[2].a.ipv4`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyPath(pub Vec<Seg>);

#[derive(Debug, Clone, PartialEq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

impl KeyPath {
    pub fn root() -> Self {
        KeyPath(Vec::new())
    }
    pub fn key(&self, k: &str) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_string()));
        p
    }
    pub fn index(&self, i: usize) -> Self {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            match s {
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k)
                    if k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    write!(f, ".{k}")?
                }
                Seg::Key(k) => write!(f, ".\"{k}\"")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// One problem found in a topology file, before anything was built.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    /// Where in the document, e.g. `links[2].b`; empty for the whole file.
    pub at: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.at.is_empty() {
            write!(f, "{}: ", self.at)?;
        }
        f.write_str(&self.message)
    }
}

/// A problem found by resolve or validate, located by key path; turned into a
/// `Diagnostic` with line and column once the source text is at hand.
#[derive(Debug, Clone)]
pub struct Problem {
    pub at: KeyPath,
    pub message: String,
}

impl Problem {
    pub fn new(at: &KeyPath, message: impl Into<String>) -> Self {
        Problem {
            at: at.clone(),
            message: message.into(),
        }
    }
}

/// Every problem of one file; displayed one per line.
#[derive(Debug)]
pub struct InvalidTopology(pub Vec<Diagnostic>);

impl fmt::Display for InvalidTopology {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InvalidTopology {}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading topology file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(InvalidTopology),
}

/// Read, parse, resolve and validate a topology file for a kernel of the
/// given abilities.
pub fn load(path: &Path, kernel: kernel::KernelFacts) -> Result<Topology, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse_str_for(&text, path, kernel).map_err(LoadError::Invalid)
}

/// Parse, resolve and validate topology text for a kernel that has
/// everything (tests; a file checked for any machine); `path` only names it in
/// errors.
pub fn parse_str(text: &str, path: &Path) -> Result<Topology, InvalidTopology> {
    parse_str_for(text, path, kernel::KernelFacts::FULL)
}

/// `parse_str` for a kernel of the given abilities.
pub fn parse_str_for(
    text: &str,
    path: &Path,
    k: kernel::KernelFacts,
) -> Result<Topology, InvalidTopology> {
    parse_inner(text, path, None, k)
}

/// `parse_str` for a scenario's merged text: `scenario_names` are the names the
/// original file declares (the merged text has no `[scenarios]` of its own).
pub(crate) fn parse_with(
    text: &str,
    path: &Path,
    scenario_names: Option<&[String]>,
    k: kernel::KernelFacts,
) -> Result<Topology, InvalidTopology> {
    parse_inner(text, path, scenario_names, k)
}

fn parse_inner(
    text: &str,
    path: &Path,
    scenario_names: Option<&[String]>,
    k: kernel::KernelFacts,
) -> Result<Topology, InvalidTopology> {
    let raw: raw::RawTopology = match toml::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            let (line, column, at) = match e.span() {
                Some(s) => {
                    let (line, column) = locate::line_col(text, s.start);
                    let at = locate::Locator::new(text).path_at(s.start);
                    (line, column, at.to_string())
                }
                None => (1, 1, String::new()),
            };
            let message = e.message().trim().replace('\n', " ");
            let message = explain_serde(&message);
            return Err(InvalidTopology(vec![Diagnostic {
                file: path.to_path_buf(),
                line,
                column,
                at,
                message,
            }]));
        }
    };
    let dir = path.parent().unwrap_or(Path::new(""));
    let (topo, mut problems) = resolve::resolve(&raw, dir, k);
    if problems.is_empty() {
        problems = validate::validate(&topo);
    }
    // `scenarios = [...]` names scenarios the file declares.
    let declared: Vec<String> = match (scenario_names, &raw.scenarios) {
        (Some(names), _) => names.to_vec(),
        (None, Some(toml::Value::Table(t))) => t.keys().cloned().collect(),
        _ => Vec::new(),
    };
    // `scenarios = [...]` of [[measure]] and [[assert]] entries alike.
    let limited = topo
        .measurements
        .iter()
        .map(|m| (&m.scenarios, &m.at))
        .chain(topo.assertions.iter().map(|a| (&a.scenarios, &a.at)));
    for (scenarios, at) in limited {
        for (i, name) in scenarios.iter().flatten().enumerate() {
            if !declared.contains(name) {
                problems.push(Problem::new(
                    &at.key("scenarios").index(i),
                    if declared.is_empty() {
                        format!(
                            "scenario \"{name}\" is not declared; the file has no [scenarios.NAME]"
                        )
                    } else {
                        format!(
                            "scenario \"{name}\" is not declared; declared: {}",
                            declared.join(", ")
                        )
                    },
                ));
            }
        }
    }
    if problems.is_empty() {
        // Each scenario must be a valid topology too.
        if raw.scenarios.is_some() {
            scenario::scenarios_str(text, path, k)?;
        }
        return Ok(topo);
    }
    Err(located(problems, text, path))
}

/// Problems found on the model, each placed at its line and column in `text`.
pub fn located(problems: Vec<Problem>, text: &str, path: &Path) -> InvalidTopology {
    let loc = locate::Locator::new(text);
    InvalidTopology(
        problems
            .into_iter()
            .map(|p| {
                let (line, column) = loc.find(&p.at);
                Diagnostic {
                    file: path.to_path_buf(),
                    line,
                    column,
                    at: p.at.to_string(),
                    message: p.message,
                }
            })
            .collect(),
    )
}

/// serde's messages name Rust-side things; say what to do in the file's terms.
fn explain_serde(msg: &str) -> String {
    if msg.starts_with("unknown field") {
        format!("{msg}; remove it or fix its spelling")
    } else if msg.starts_with("missing field") {
        format!("{msg}; add it")
    } else {
        msg.to_string()
    }
}

/// Names of nodes and labs become namespace names and state file names.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        && s.as_bytes()[0].is_ascii_alphanumeric()
}

/// Linux interface names: 1..=15 bytes, no '/', ':' or white space, not `.` or `..`.
pub const IFNAMSIZ_MAX: usize = 15;

pub fn interface_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("interface name is empty".into())
    } else if name.len() > IFNAMSIZ_MAX {
        Some(format!(
            "interface name \"{name}\" is {} bytes; Linux allows at most {IFNAMSIZ_MAX}",
            name.len()
        ))
    } else if name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
    {
        Some(format!(
            "interface name \"{name}\" is not allowed by Linux (no '/', ':', spaces, '.' or '..')"
        ))
    } else {
        None
    }
}

/// A whole number from the file that must lie in `range`: the default when
/// absent; out of range, a problem (`explain` says what to use) and the default.
pub(crate) fn int_in(
    v: Option<i64>,
    range: std::ops::RangeInclusive<i64>,
    default: i64,
    at: &KeyPath,
    p: &mut Vec<Problem>,
    explain: impl FnOnce(i64) -> String,
) -> i64 {
    match v {
        None => default,
        Some(x) if range.contains(&x) => x,
        Some(x) => {
            p.push(Problem::new(at, explain(x)));
            default
        }
    }
}
