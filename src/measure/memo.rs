//! What a lab has already measured, so two paths that ask for the same thing
//! measure it once: a cell (same source, target address, cell, runs,
//! durations and rules) and a family's idle latency (same source, target
//! address and probes). The second path shows the first one's figures and
//! says whose they are.

use super::results::{CellResult, Latency};
use super::spec::MeasureSpec;
use crate::vocab::{Cell, Family};
use std::net::IpAddr;

/// The measurements of one running lab, in the order they were made.
#[derive(Default)]
pub struct LabMemo {
    cells: Vec<(MeasureSpec, IpAddr, CellResult, String)>,
    idle: Vec<(MeasureSpec, IpAddr, Family, Latency)>,
}

/// What makes two paths' measurements the same, whatever they are called
/// and whatever else they measure: `spec` without its name, scenario,
/// matrix and targets.
fn method_of(spec: &MeasureSpec) -> MeasureSpec {
    MeasureSpec {
        path: String::new(),
        scenario: None,
        ipv4: None,
        ipv6: None,
        families: Vec::new(),
        protocols: Vec::new(),
        directions: Vec::new(),
        streams: Vec::new(),
        ..spec.clone()
    }
}

/// Whether two paths measure the same way (see `method_of`).
pub(super) fn same_method(a: &MeasureSpec, b: &MeasureSpec) -> bool {
    method_of(a) == method_of(b)
}

impl LabMemo {
    /// The cell another path of this lab measured the same way toward
    /// `addr`, marked as that path's (its time counted there, not here).
    pub fn cell(&self, spec: &MeasureSpec, addr: IpAddr, cell: &Cell) -> Option<CellResult> {
        let method = method_of(spec);
        let (_, _, result, label) = self
            .cells
            .iter()
            .find(|(m, a, r, _)| *m == method && *a == addr && r.cell == *cell)?;
        Some(CellResult {
            measured_with: Some(label.clone()),
            seconds: None,
            ..result.clone()
        })
    }

    /// Keeps a cell `label` (a path's name, with its scenario's) measured.
    pub fn keep_cell(
        &mut self,
        spec: &MeasureSpec,
        addr: IpAddr,
        result: &CellResult,
        label: &str,
    ) {
        if result.error.is_none() && result.measured_with.is_none() {
            self.cells
                .push((method_of(spec), addr, result.clone(), label.to_string()));
        }
    }

    /// The idle latency another path of this lab measured toward `addr`.
    pub fn idle(&self, spec: &MeasureSpec, addr: IpAddr, family: Family) -> Option<Latency> {
        let method = method_of(spec);
        self.idle
            .iter()
            .find(|(m, a, f, _)| *m == method && *a == addr && *f == family)
            .map(|(_, _, _, l)| l.clone())
    }

    pub fn keep_idle(&mut self, spec: &MeasureSpec, addr: IpAddr, family: Family, l: &Latency) {
        self.idle.push((method_of(spec), addr, family, l.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Direction, Proto};

    fn spec(path: &str, runs: u32) -> MeasureSpec {
        MeasureSpec {
            path: path.into(),
            runs,
            ..MeasureSpec::seed("pc", "inet")
        }
    }

    const CELL: Cell = Cell {
        family: Family::Ipv6,
        protocol: Proto::Tcp,
        direction: Direction::Receiver,
        streams: 1,
    };

    #[test]
    fn a_cell_measured_the_same_way_is_shared_and_says_whose_it_is() {
        let addr: IpAddr = "2001:2:0:20::10".parse().unwrap();
        let mut memo = LabMemo::default();
        let mut measured = CellResult::failed(CELL, String::new());
        measured.error = None;
        measured.median_bps = 248e6;
        measured.seconds = Some(9.4);
        memo.keep_cell(&spec("native-ipv6", 3), addr, &measured, "fast/native-ipv6");
        let shared = memo.cell(&spec("speedtest", 3), addr, &CELL).unwrap();
        assert_eq!(shared.median_bps, 248e6);
        assert_eq!(shared.measured_with.as_deref(), Some("fast/native-ipv6"));
        assert_eq!(shared.seconds, None, "its time is the first path's");
        let other = Cell { streams: 6, ..CELL };
        assert!(memo.cell(&spec("speedtest", 3), addr, &other).is_none());
        assert!(
            memo.cell(&spec("speedtest", 5), addr, &CELL).is_none(),
            "other runs"
        );
        let elsewhere: IpAddr = "2001:2:0:1::10".parse().unwrap();
        assert!(memo.cell(&spec("speedtest", 3), elsewhere, &CELL).is_none());
    }

    #[test]
    fn a_failed_cell_is_never_shared() {
        let addr: IpAddr = "198.18.1.10".parse().unwrap();
        let mut memo = LabMemo::default();
        let failed = CellResult::failed(CELL, "refused".into());
        memo.keep_cell(&spec("a", 3), addr, &failed, "a");
        assert!(memo.cell(&spec("b", 3), addr, &CELL).is_none());
    }
}
