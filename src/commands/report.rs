//! `tunbench report`, and the output options every results-producing command
//! shares: render, save, and check expectations (exit 1 when one fails).

use super::bad_input;
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// What to write: text (one view per question), json (the results, for
    /// `tunbench report`), csv, md (the full matrix), svg (the matrix as one
    /// chart), or html (one self-contained page with every view's charts
    /// and table, the notes and the topology's graph; open it in a browser,
    /// nothing is fetched).
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::Format,
    /// Write the report here instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also save the results as JSON here (for `tunbench report`).
    #[arg(long)]
    pub save: Option<PathBuf>,
    /// The path the matrix's ratio columns divide by (md; default: the
    /// first); in text, a last view of every path against it.
    #[arg(long)]
    pub baseline: Option<String>,
    /// A CI expectation, e.g. 'ipv4.tcp.sender >= 500M' or 'wg/raw >= 0.2' (medians);
    /// any that fails makes the exit code 1. Repeatable.
    #[arg(long = "expect")]
    pub expect: Vec<String>,
    /// Exit 1 when a cell the topology's [reference] publishes a figure for was
    /// measured outside the tolerance (or failed); 2 when there are no published
    /// figures to check.
    #[arg(long)]
    pub expect_reference: bool,
}

/// The error of `--expect-reference` on results without published figures.
pub(super) const NO_REFERENCE: &str = "--expect-reference: no published figures to check against; \
     add a [reference] section to the topology";

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Saved results (JSON). Several are merged into one report: the parts
    /// of one lab that its hosts measured (`run --host`), no path in two.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub out: OutputArgs,
}

pub fn report(a: ReportArgs) -> Result<i32> {
    let ReportArgs { files, out } = a;
    let parts = files
        .into_iter()
        .map(|f| {
            let r = crate::report::load(&f).map_err(|e| bad_input(e.to_string()))?;
            Ok((f, r))
        })
        .collect::<Result<Vec<_>>>()?;
    let r = crate::report::merge::merge(parts).map_err(|e| bad_input(e.to_string()))?;
    emit(&r, &out)
}

/// The results' topology file drawn and in dot, as `tunbench graph` gives
/// them, or why there is none (results that name no file, a file moved or
/// changed since).
fn topology_graph(r: &crate::measure::results::Results) -> Result<(String, String), String> {
    let file = r
        .topology
        .as_deref()
        .ok_or("the results do not name their topology file")?;
    let t = crate::topology::load(std::path::Path::new(file), crate::lab::this_kernel()).map_err(
        |e| {
            format!(
                "topology file {file} could not be read: {}",
                crate::report::one_line(&format!("{e:#}"))
            )
        },
    )?;
    use crate::report::graph::{GraphFormat, render};
    Ok((render(&t, GraphFormat::Svg), render(&t, GraphFormat::Dot)))
}

impl OutputArgs {
    /// The `--expect` expectations, parsed: a command that measures calls it
    /// before it builds or measures anything, so a malformed one is refused
    /// (exit 2) at once rather than after the whole matrix.
    pub(super) fn expectations(&self) -> Result<Vec<crate::report::expect::Expectation>> {
        self.expect
            .iter()
            .map(|e| {
                crate::report::expect::parse(e)
                    .map_err(|m| bad_input(format!("--expect '{e}': {m}")))
            })
            .collect()
    }
}

/// Render, save, check expectations: exit 1 when one fails.
pub(super) fn emit(r: &crate::measure::results::Results, out: &OutputArgs) -> Result<i32> {
    let expectations = out.expectations()?;
    // A host's part may measure no path, only its underlays.
    if out.baseline.is_some() || !r.paths.is_empty() {
        crate::report::baseline_index(r, out.baseline.as_deref())
            .map_err(|m| bad_input(format!("--baseline: {m}")))?;
    }
    if out.expect_reference && r.reference.is_none() {
        return Err(bad_input(NO_REFERENCE));
    }
    if let Some(p) = &out.save {
        std::fs::write(p, serde_json::to_string_pretty(r)?)
            .with_context(|| format!("saving results to {}", p.display()))?;
    }
    let text = match out.format {
        crate::report::Format::Html => {
            let graph = topology_graph(r);
            crate::report::html::page(
                r,
                out.baseline.as_deref(),
                match &graph {
                    Ok((svg, dot)) => Ok(crate::report::html::Graph { svg, dot }),
                    Err(why) => Err(why.clone()),
                },
            )
        }
        f => crate::report::render(r, f, out.baseline.as_deref()),
    };
    match &out.output {
        Some(p) => std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{text}"),
    }
    let mut failures =
        crate::report::expect::check_with_baseline(r, &expectations, out.baseline.as_deref());
    if out.expect_reference {
        failures.extend(crate::report::reference::check(r));
    }
    for f in &failures {
        eprintln!("tunbench: expectation failed: {f}");
    }
    Ok(if failures.is_empty() { 0 } else { 1 })
}
