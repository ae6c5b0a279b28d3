//! What a measurement produces: cells (family x protocol x direction x streams),
//! each measured N times on each path, with the UDP rate search where it applies.
//! Reports read only these types; saved results are these types as JSON.

use crate::topology::reference::Reference;
use crate::vocab::Cell;
use serde::{Deserialize, Serialize};

/// One run of one cell: what the receiving end got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub bits_per_second: f64,
    pub bytes: u64,
    pub seconds: f64,
    /// TCP: retransmitted segments on the sending side.
    pub retransmits: Option<u64>,
    /// UDP: the rate offered (the `-b` of the run).
    pub offered_bps: Option<f64>,
    pub lost_percent: Option<f64>,
    pub jitter_ms: Option<f64>,
    pub out_of_order: Option<u64>,
    /// UDP: the sender could not offer the rate asked; `offered_bps` is what it
    /// did send.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sender_limited: bool,
    /// CPU use in percent of one core: the measuring client and the server.
    pub cpu_client: f64,
    pub cpu_server: f64,
    /// The receiving end's rate per reporting interval (bits per second, one
    /// per `interval_seconds`), for charts over time. Empty in older results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals_bps: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_seconds: Option<f64>,
}

/// One trial of the UDP rate search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    pub offered_bps: f64,
    pub received_bps: f64,
    pub lost_percent: f64,
    pub out_of_order: u64,
    /// Measured again because packets arrived out of order (the NVR500 study's rule).
    pub remeasured: bool,
    /// The sender could not offer the rate asked: `offered_bps` is what it sent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sender_limited: bool,
    /// Measured again because the trial before it had packets out of order,
    /// and packets were out of order again: the reordering persisted, so the
    /// trial fails at its rate whatever its loss (the NVR500 study's rule: "if UDP
    /// shows out of order, measure again; if it persists, lower -b"). False
    /// in results saved before the rule was whole, which were judged by loss
    /// alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reordered: bool,
}

impl Trial {
    /// Within the loss threshold (percent), and not failed for reordering that
    /// persisted.
    pub fn passes(&self, threshold: f64) -> bool {
        self.lost_percent <= threshold && !self.reordered
    }

    /// Whether a trial shows out of order, in the NVR500 study's sense: any datagram
    /// out of order. No tolerance: on a path whose links do not reorder on
    /// purpose (`reorder`, `jitter`) one flow keeps its order, as a switch
    /// and a NIC queue keep it, so a datagram out of order is a symptom (an
    /// overloaded end, a queue handing packets over on two CPUs), never noise.
    /// iperf3 counts duplicates here too.
    pub fn shows_out_of_order(&self) -> bool {
        self.out_of_order > 0
    }
}

/// The highest offered UDP rate whose receiver-side loss stays within the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdpSearch {
    pub loss_threshold_percent: f64,
    pub trials: Vec<Trial>,
    /// The cell's figure: the highest offered rate at which a confirmation run
    /// (a full-length run, `CellResult::runs`) kept its loss within the
    /// threshold. 0 when none did.
    pub rate_bps: f64,
    /// Every confirmation run in the order made, those over the threshold
    /// (after which the rate stepped down) included. Empty in results saved
    /// before confirmations were judged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirmations: Vec<Trial>,
    /// Wall seconds each trial and each confirmation took, in their order
    /// (the client's start and end included). Empty in older results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trial_seconds: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub confirmation_seconds: Vec<f64>,
    /// Where the search started, and why there. None in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<SearchStart>,
}

/// The first rate a UDP search tried, and what it was drawn from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchStart {
    /// bit/s offered by the first trial.
    pub rate_bps: f64,
    /// The predicted limit on the cell's payload it was drawn from (the
    /// tighter of the model's and the wire's), bit/s; None: nothing
    /// predicted one, and the search started from the default rate.
    pub predicted_bps: Option<f64>,
    /// For a reader: "wire: ..., 29.2 Mbit/s of payload, at 10 % loss".
    pub why: String,
}

impl UdpSearch {
    /// The confirmation runs that broke the rule (loss over the threshold, or
    /// reordering that persisted when the run was made again), each with the
    /// rate tried next: what reports say about a figure that was stepped down.
    /// A run made again (packets out of order) stands for the one before it.
    pub fn step_downs(&self) -> Vec<(&Trial, Option<f64>)> {
        let c = &self.confirmations;
        c.iter()
            .enumerate()
            .filter(|(i, t)| {
                let superseded = c.get(i + 1).is_some_and(|n| n.remeasured);
                !superseded && !t.passes(self.loss_threshold_percent)
            })
            .map(|(i, t)| (t, c.get(i + 1).map(|n| n.offered_bps)))
            .collect()
    }
}

pub use crate::engine::latency::stats::{Latency, Spread};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    pub cell: Cell,
    pub runs: Vec<Run>,
    /// The NVR500 study's rule: the best of the runs.
    pub best_bps: f64,
    pub median_bps: f64,
    pub min_bps: f64,
    pub max_bps: f64,
    pub search: Option<UdpSearch>,
    /// Why the cell has no figure, if it has none.
    pub error: Option<String>,
    /// Latency under this cell's load (probes during the runs, pooled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    /// The tightest ceiling the lab's device models put on this cell's
    /// traffic: what the model predicts for it, named so a report can say
    /// what limits a path nobody published a figure for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_limit: Option<ModelLimit>,
    /// The tightest goodput the shaped links on the cell's way allow its
    /// packets (line rate x payload / wire bytes per frame): what physics
    /// predicts, whatever the devices do. Absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_limit: Option<ModelLimit>,
    /// Wall seconds the cell took: its runs, a UDP cell's search and
    /// confirmations. Absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// Another path of the same lab measured this very cell (same source,
    /// target address, runs, durations and rules): its label
    /// ("fast/native-ipv6"). The figures are that measurement's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_with: Option<String>,
}

/// A ceiling of a device model on a cell's path, and whose it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelLimit {
    /// What limits it, for a reader: "nvr500 fast path ipv4 udp upload ceiling".
    pub what: String,
    pub bps: f64,
}

impl CellResult {
    /// Summarise the runs (best, median, min, max of bits per second).
    pub fn from_runs(cell: Cell, runs: Vec<Run>, search: Option<UdpSearch>) -> CellResult {
        let mut v: Vec<f64> = runs.iter().map(|r| r.bits_per_second).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let median = if v.is_empty() {
            0.0
        } else if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        CellResult {
            cell,
            best_bps: v.last().copied().unwrap_or(0.0),
            median_bps: median,
            min_bps: v.first().copied().unwrap_or(0.0),
            max_bps: v.last().copied().unwrap_or(0.0),
            runs,
            search,
            error: None,
            latency: None,
            model_limit: None,
            wire_limit: None,
            seconds: None,
            measured_with: None,
        }
    }

    pub fn failed(cell: Cell, error: String) -> CellResult {
        CellResult {
            cell,
            runs: Vec::new(),
            best_bps: 0.0,
            median_bps: 0.0,
            min_bps: 0.0,
            max_bps: 0.0,
            search: None,
            error: Some(error),
            latency: None,
            model_limit: None,
            wire_limit: None,
            seconds: None,
            measured_with: None,
        }
    }
}

/// One path measured between two nodes: the raw underlay, or a tunnel; in a
/// scenario (a variant of the topology) where there are several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathResult {
    /// "raw", "wg", "dslite", ...
    pub path: String,
    pub scenario: Option<String>,
    pub from: String,
    pub to: String,
    pub ipv4: Option<String>,
    pub ipv6: Option<String>,
    pub cells: Vec<CellResult>,
    /// Latency with the path idle (probes alone), per family, measured before
    /// the cells; the baseline for each cell's latency under load.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_latency: Vec<(crate::vocab::Family, Latency)>,
    /// The tunnel the path crosses, and what it costs per packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelCost>,
    /// In a lab placed on several hosts, the hosts its packets cross in
    /// order, from `from`'s (["pc", "router", "server"]); empty on one machine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Wall seconds the idle latency took, every family. Absent in older
    /// results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_latency_seconds: Option<f64>,
    /// The scenario whose lab this path was measured in, when its own
    /// scenario resolved to that same lab on this machine: the figures are
    /// that scenario's, shown under this one's name too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_lab_as: Option<String>,
}

/// What a tunnel adds to each packet that crosses it, as tunbench states it
/// (core/src/codec/overhead.rs); a range where options vary it per packet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunnelCost {
    /// The tunnel's name in the topology.
    pub name: String,
    /// "WireGuard", "ESP in UDP", "DS-Lite", ...
    pub encapsulation: String,
    /// The underlay family: "IPv4" or "IPv6".
    pub outer: String,
    pub bytes_min: u32,
    pub bytes_max: u32,
    pub inner_mtu: u32,
}

impl PathResult {
    /// "raw", or "fast/raw" in a scenario: how reports and --expect name it.
    pub fn label(&self) -> String {
        match &self.scenario {
            Some(s) => format!("{s}/{}", self.path),
            None => self.path.clone(),
        }
    }

    pub fn cell(&self, c: &Cell) -> Option<&CellResult> {
        self.cells.iter().find(|r| r.cell == *c)
    }
}

/// A whole measurement: what `--format json` writes and `tunbench report` reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub tool: String,
    pub lab: String,
    pub topology: Option<String>,
    /// Unix seconds.
    pub started: u64,
    pub seconds: f64,
    pub runs_per_cell: u32,
    pub duration_per_run: f64,
    pub paths: Vec<PathResult>,
    /// Published figures to compare with, from the topology's `[reference]`.
    /// Absent in results saved before there were any, and left out of the JSON
    /// when there are none, so such results read and write as they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Reference>,
    /// Lines the measuring run wants printed under the report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// In a lab placed on several hosts, the host whose part measured these
    /// results (`run --host`); None on one machine and in merged results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The underlays between hosts, measured before the cells.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub underlays: Vec<UnderlayResult>,
    /// Wall seconds of each lab's `up` and `down` (`run`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<LabPhase>,
}

/// A lab built or taken down during a run, and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabPhase {
    /// The scenario whose lab it was, if any.
    pub scenario: Option<String>,
    /// "up" or "down".
    pub what: String,
    pub seconds: f64,
}

/// The underlay between two hosts of a placed lab, measured from `from_host`
/// before the cells: TCP, one stream, each way, between the hosts' underlay
/// addresses (outside the lab's namespaces): the capacity every VXLAN link
/// between them shares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnderlayResult {
    pub from_host: String,
    pub to_host: String,
    pub from_address: String,
    pub to_address: String,
    /// From `from_host` to `to_host`, bits per second; None when it failed.
    pub upload_bps: Option<f64>,
    /// From `to_host` back to `from_host`.
    pub download_bps: Option<f64>,
    pub seconds: f64,
    /// Why a direction has no figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Where a run's time went, from its recorded phases: labs up and down,
/// idle latency, and the cells (TCP runs; UDP search trials and
/// confirmations, with their counts). None for results without timings.
pub fn time_note(r: &Results) -> Option<String> {
    // + 0.0: an empty sum is -0.0, which would print as "-0.0 s".
    let sum = |v: &mut dyn Iterator<Item = f64>| v.sum::<f64>() + 0.0;
    let phase = |what: &str| {
        sum(&mut r
            .phases
            .iter()
            .filter(|p| p.what == what)
            .map(|p| p.seconds))
    };
    // What was measured here: not a path or cell shown again under another name.
    let measured = || r.paths.iter().filter(|p| p.same_lab_as.is_none());
    let idle = sum(&mut measured().filter_map(|p| p.idle_latency_seconds)) + phase("idle latency");
    let cells: Vec<&CellResult> = measured()
        .flat_map(|p| &p.cells)
        .filter(|c| c.measured_with.is_none())
        .collect();
    let timed = |proto: crate::vocab::Proto| {
        let c: Vec<&&CellResult> = cells.iter().filter(|c| c.cell.protocol == proto).collect();
        (c.len(), sum(&mut c.iter().filter_map(|c| c.seconds)))
    };
    if r.phases.is_empty() && cells.iter().all(|c| c.seconds.is_none()) {
        return None;
    }
    let (tcp_n, tcp_s) = timed(crate::vocab::Proto::Tcp);
    let (udp_n, udp_s) = timed(crate::vocab::Proto::Udp);
    let searches: Vec<&UdpSearch> = cells.iter().filter_map(|c| c.search.as_ref()).collect();
    let trials: Vec<f64> = searches
        .iter()
        .flat_map(|s| s.trial_seconds.iter().copied())
        .collect();
    let confirms: Vec<f64> = searches
        .iter()
        .flat_map(|s| s.confirmation_seconds.iter().copied())
        .collect();
    let labs = r.phases.iter().filter(|p| p.what == "up").count();
    let all_cells = r.paths.iter().map(|p| p.cells.len()).sum::<usize>();
    let shared = match all_cells - cells.len() {
        0 => String::new(),
        n => format!("; {n} cell(s) shown again from the same measurement, not measured twice"),
    };
    Some(format!(
        "time: {labs} lab(s) up {:.1} s, down {:.1} s; idle latency {idle:.1} s; {tcp_n} TCP cell(s) {tcp_s:.1} s; {udp_n} UDP cell(s) {udp_s:.1} s, of which {} search trial(s) {:.1} s and {} confirmation run(s) {:.1} s{shared}.",
        phase("up"),
        phase("down"),
        trials.len(),
        sum(&mut trials.iter().copied()),
        confirms.len(),
        sum(&mut confirms.iter().copied()),
    ))
}

/// A cell at this share of the underlay's measured capacity or more is said
/// to have reached it: the figure may be the underlay's, not the path's.
pub const AT_UNDERLAY_CAPACITY: f64 = 0.9;

impl Results {
    /// The measured capacity of the underlay from host `a` to host `b`.
    pub fn underlay_bps(&self, a: &str, b: &str) -> Option<f64> {
        self.underlays.iter().find_map(|u| {
            if (u.from_host.as_str(), u.to_host.as_str()) == (a, b) {
                u.upload_bps
            } else if (u.from_host.as_str(), u.to_host.as_str()) == (b, a) {
                u.download_bps
            } else {
                None
            }
        })
    }

    /// The tightest measured underlay a cell's data crosses (the hosts in
    /// the data's direction: `from` to `to` for the sender, back for the
    /// receiver), with its two hosts; None when none was measured.
    pub fn underlay_limit(
        &self,
        path: &PathResult,
        cell: &crate::vocab::Cell,
    ) -> Option<(f64, String, String)> {
        let mut hosts: Vec<&str> = path.hosts.iter().map(String::as_str).collect();
        if cell.direction == crate::vocab::Direction::Receiver {
            hosts.reverse();
        }
        hosts
            .windows(2)
            .filter_map(|w| Some((self.underlay_bps(w[0], w[1])?, w[0], w[1])))
            .min_by(|x, y| x.0.total_cmp(&y.0))
            .map(|(bps, a, b)| (bps, a.to_string(), b.to_string()))
    }

    /// Whether a cell's best run reached the underlay's capacity
    /// (`AT_UNDERLAY_CAPACITY` of it): then the underlay, not the path, may
    /// be what the figure measures.
    pub fn at_underlay_capacity(
        &self,
        path: &PathResult,
        cell: &CellResult,
    ) -> Option<(f64, String, String)> {
        let limit = self.underlay_limit(path, &cell.cell)?;
        (cell.error.is_none() && cell.best_bps >= AT_UNDERLAY_CAPACITY * limit.0).then_some(limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Direction, Family, Proto};

    #[test]
    fn step_downs_name_the_runs_that_broke_the_rule_and_the_next_rate() {
        let t = |offered: f64, lost: f64, remeasured: bool| Trial {
            offered_bps: offered,
            received_bps: offered * (1.0 - lost / 100.0),
            lost_percent: lost,
            out_of_order: 0,
            remeasured,
            sender_limited: false,
            reordered: false,
        };
        let s = UdpSearch {
            loss_threshold_percent: 10.0,
            trial_seconds: Vec::new(),
            confirmation_seconds: Vec::new(),
            start: None,
            trials: Vec::new(),
            rate_bps: 150.0,
            // Over the threshold but made again (out of order): not a step-down;
            // its second run is, and the one after passes.
            confirmations: vec![
                t(200.0, 30.0, false),
                t(200.0, 35.0, true),
                t(150.0, 1.0, false),
            ],
        };
        let steps = s.step_downs();
        assert_eq!(steps.len(), 1);
        assert_eq!((steps[0].0.lost_percent, steps[0].1), (35.0, Some(150.0)));
    }

    /// A cell is held to the tightest underlay its data crosses, each way.
    #[test]
    fn a_cell_at_the_tightest_underlay_on_its_way_is_flagged() {
        let u = |a: &str, b: &str, up: f64, down: f64| UnderlayResult {
            from_host: a.into(),
            to_host: b.into(),
            from_address: String::new(),
            to_address: String::new(),
            upload_bps: Some(up),
            download_bps: Some(down),
            seconds: 1.0,
            error: None,
        };
        let mut r = crate::report::fixture::results();
        r.underlays = vec![
            u("pc", "router", 900.0, 800.0),
            u("server", "router", 950.0, 500.0),
        ];
        let mut path = r.paths[0].clone();
        path.hosts = vec!["pc".into(), "router".into(), "server".into()];
        let mut cell = path.cells[0].clone();
        cell.cell.direction = Direction::Sender;
        // Upload: pc->router 900, router->server (server's download) 500.
        assert_eq!(
            r.underlay_limit(&path, &cell.cell),
            Some((500.0, "router".into(), "server".into()))
        );
        cell.cell.direction = Direction::Receiver;
        assert_eq!(
            r.underlay_limit(&path, &cell.cell),
            Some((800.0, "router".into(), "pc".into()))
        );
        cell.best_bps = 719.0;
        assert!(r.at_underlay_capacity(&path, &cell).is_none());
        cell.best_bps = 720.0;
        assert!(r.at_underlay_capacity(&path, &cell).is_some());
        path.hosts.clear();
        assert!(r.underlay_limit(&path, &cell.cell).is_none(), "one machine");
    }

    /// The note adds up what was timed; results without timings get none.
    #[test]
    fn the_time_note_adds_up_labs_idle_latency_cells_trials_and_confirmations() {
        let mut r = crate::report::fixture::results();
        assert_eq!(time_note(&r), None, "older results: no timings");
        for (scenario, what, seconds) in [("a", "up", 2.0), ("a", "down", 1.0), ("b", "up", 3.0)] {
            r.phases.push(LabPhase {
                scenario: Some(scenario.into()),
                what: what.into(),
                seconds,
            });
        }
        r.paths[0].idle_latency_seconds = Some(4.0);
        for c in &mut r.paths[0].cells {
            c.seconds = Some(10.0);
            if let Some(s) = c.search.as_mut() {
                s.trial_seconds = vec![1.5, 1.5];
                s.confirmation_seconds = vec![3.0];
            }
        }
        let note = time_note(&r).unwrap();
        // The fixture's raw path: 4 TCP cells and 2 UDP cells, each searched.
        assert_eq!(
            note,
            "time: 2 lab(s) up 5.0 s, down 1.0 s; idle latency 4.0 s; 7 TCP cell(s) 40.0 s; 4 UDP cell(s) 20.0 s, of which 4 search trial(s) 6.0 s and 2 confirmation run(s) 6.0 s."
        );
        // Figures shown again (a scenario of the same lab, a cell another path
        // measured) add no time and are counted apart.
        let mut again = r.paths[0].clone();
        again.same_lab_as = Some("a".into());
        r.paths.push(again);
        let n = r.paths[0].cells.len();
        let mut cell = r.paths[0].cells[0].clone();
        cell.measured_with = Some("a/raw".into());
        r.paths[0].cells.push(cell);
        let expected = format!(
            "{}; {} cell(s) shown again from the same measurement, not measured twice.",
            note.trim_end_matches('.'),
            n + 1
        );
        assert_eq!(time_note(&r).unwrap(), expected);
    }

    #[test]
    fn best_median_and_spread() {
        let run = |bps: f64| Run {
            bits_per_second: bps,
            bytes: 0,
            seconds: 1.0,
            retransmits: None,
            offered_bps: None,
            lost_percent: None,
            jitter_ms: None,
            out_of_order: None,
            sender_limited: false,
            cpu_client: 0.0,
            cpu_server: 0.0,
            intervals_bps: Vec::new(),
            interval_seconds: None,
        };
        let c = Cell {
            family: Family::Ipv4,
            protocol: Proto::Tcp,
            direction: Direction::Sender,
            streams: 1,
        };
        let r = CellResult::from_runs(c, vec![run(3.0), run(1.0), run(5.0), run(2.0)], None);
        assert_eq!(
            (r.best_bps, r.median_bps, r.min_bps, r.max_bps),
            (5.0, 2.5, 1.0, 5.0)
        );
    }
}
