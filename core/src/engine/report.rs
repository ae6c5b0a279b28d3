//! A finished test as numbers, and how they print: text close to iperf3's, and
//! JSON in iperf3's -J shape so existing tooling reads it.

use super::cpu::CpuUtil;
use super::exchanged_results::{ExchangedResults, StreamResult};
use super::params::{Protocol, TestParams};
use super::stream::StreamOutcome;
use serde_json::{Value, json};

/// One stream seen from both ends.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StreamPair {
    pub id: u32,
    /// The client sends on it.
    pub upstream: bool,
    pub sender_bytes: u64,
    pub receiver_bytes: u64,
    pub sender_seconds: f64,
    pub receiver_seconds: f64,
    pub retransmits: Option<u64>,
    pub packets: u64,
    pub lost: u64,
    pub out_of_order: u64,
    pub jitter_ms: f64,
}

/// Totals of one direction of a test.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct DirectionSum {
    pub streams: usize,
    pub sent_bytes: u64,
    pub received_bytes: u64,
    /// The test's time, which iperf3 divides both counts by.
    pub seconds: f64,
    /// The receiving end's own time, the tail after the test's time included
    /// (the longest of its streams'): what arrived took this long.
    pub receiver_seconds: f64,
    pub sent_bps: f64,
    /// iperf3's figure: received bytes over the test's time. Bytes a queue
    /// still held at the end arrive after it, so this can exceed what the
    /// path carries; `arrived_bps` cannot.
    pub received_bps: f64,
    pub retransmits: Option<u64>,
    pub packets: u64,
    pub lost: u64,
    pub lost_percent: f64,
    pub out_of_order: u64,
    pub jitter_ms: f64,
}

impl DirectionSum {
    /// Bits per second of what arrived over the time it took to arrive.
    pub fn arrived_bps(&self) -> f64 {
        if self.receiver_seconds > 0.0 {
            self.received_bytes as f64 * 8.0 / self.receiver_seconds
        } else {
            0.0
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Interval {
    pub start: f64,
    pub end: f64,
    /// (stream id, bytes moved in the interval, whether this end sends on it)
    pub streams: Vec<(u32, u64, bool)>,
    pub omitted: bool,
}

/// A finished test from one end's point of view.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TestReport {
    pub client: bool,
    #[serde(skip)]
    pub params: TestParams,
    pub protocol: Protocol,
    pub local: String,
    pub remote: String,
    pub pairs: Vec<StreamPair>,
    pub cpu_local: CpuUtil,
    pub cpu_remote: CpuUtil,
    pub intervals: Vec<Interval>,
    pub version: String,
    pub timestamp: u64,
}

impl TestReport {
    /// Join this end's stream outcomes with the peer's exchanged results.
    pub fn build(
        client: bool,
        params: &TestParams,
        local: &[StreamOutcome],
        remote: &ExchangedResults,
    ) -> Vec<StreamPair> {
        let omit = params.omit as f64;
        let mut pairs = Vec::new();
        for l in local {
            let r = remote
                .streams
                .iter()
                .find(|s| s.id == l.id)
                .cloned()
                .unwrap_or(StreamResult {
                    id: l.id,
                    bytes: 0,
                    retransmits: -1,
                    jitter: 0.0,
                    errors: 0,
                    omitted_errors: 0,
                    packets: 0,
                    omitted_packets: 0,
                    start_time: 0.0,
                    end_time: 0.0,
                });
            let (s_bytes, r_bytes, s_secs, r_secs) = if l.sending {
                (l.bytes, r.bytes, l.seconds, r.end_time)
            } else {
                (r.bytes, l.bytes, r.end_time, l.seconds)
            };
            // UDP loss and jitter are the receiver's; packets sent are the sender's.
            let (packets, lost, ooo, jitter) = if l.sending {
                (l.packets, r.errors.max(0) as u64, 0, r.jitter * 1000.0)
            } else {
                (l.packets, l.lost, l.out_of_order, l.jitter * 1000.0)
            };
            let retrans = if l.sending {
                l.retransmits
            } else if r.retransmits >= 0 {
                Some(r.retransmits as u64)
            } else {
                None
            };
            pairs.push(StreamPair {
                id: l.id,
                upstream: l.sending == client,
                sender_bytes: s_bytes,
                receiver_bytes: r_bytes,
                // Local times count from TEST_START; the peer's from the end of omit.
                sender_seconds: if l.sending {
                    (s_secs - omit).max(0.0)
                } else {
                    s_secs
                },
                receiver_seconds: if l.sending {
                    r_secs
                } else {
                    l.arrival_span.unwrap_or((r_secs - omit).max(0.0))
                },
                retransmits: retrans,
                packets,
                lost,
                out_of_order: ooo,
                jitter_ms: jitter,
            });
        }
        pairs
    }

    /// The test's main direction: client -> server, or server -> client with -R.
    pub fn forward(&self) -> DirectionSum {
        self.sum(!self.params.reverse || self.params.bidir)
    }

    /// --bidir's other direction.
    pub fn reverse(&self) -> Option<DirectionSum> {
        self.params.bidir.then(|| self.sum(false))
    }

    fn sum(&self, upstream: bool) -> DirectionSum {
        let ps: Vec<&StreamPair> = self
            .pairs
            .iter()
            .filter(|p| p.upstream == upstream)
            .collect();
        let seconds = if self.params.time > 0 {
            self.params.time as f64
        } else {
            ps.iter().map(|p| p.sender_seconds).fold(0.0, f64::max)
        };
        let sent: u64 = ps.iter().map(|p| p.sender_bytes).sum();
        let received: u64 = ps.iter().map(|p| p.receiver_bytes).sum();
        let packets: u64 = ps.iter().map(|p| p.packets).sum();
        let lost: u64 = ps.iter().map(|p| p.lost).sum();
        let bps = |b: u64| {
            if seconds > 0.0 {
                b as f64 * 8.0 / seconds
            } else {
                0.0
            }
        };
        let receiver_seconds = ps.iter().map(|p| p.receiver_seconds).fold(0.0, f64::max);
        DirectionSum {
            streams: ps.len(),
            sent_bytes: sent,
            received_bytes: received,
            seconds,
            receiver_seconds: if receiver_seconds > 0.0 {
                receiver_seconds
            } else {
                seconds
            },
            sent_bps: bps(sent),
            received_bps: bps(received),
            retransmits: ps.iter().map(|p| p.retransmits).sum(),
            packets,
            lost,
            lost_percent: if packets > 0 {
                100.0 * lost as f64 / packets as f64
            } else {
                0.0
            },
            out_of_order: ps.iter().map(|p| p.out_of_order).sum(),
            jitter_ms: if ps.is_empty() {
                0.0
            } else {
                ps.iter().map(|p| p.jitter_ms).sum::<f64>() / ps.len() as f64
            },
        }
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let udp = self.protocol == Protocol::Udp;
        if !self.intervals.is_empty() {
            s += "[ ID] Interval           Transfer     Bitrate\n";
            for iv in &self.intervals {
                for (id, bytes, _) in &iv.streams {
                    s += &format!(
                        "[{id:>3}] {:>6.2}-{:<6.2} sec  {}  {}{}\n",
                        iv.start,
                        iv.end,
                        bytes_h(*bytes),
                        rate_h(*bytes as f64 * 8.0 / (iv.end - iv.start).max(1e-9)),
                        if iv.omitted { "  (omitted)" } else { "" }
                    );
                }
            }
        }
        s += "- - - - - - - - - - - - - - - - - - - - - - - - -\n";
        s += if udp {
            "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
        } else {
            "[ ID] Interval           Transfer     Bitrate         Retr\n"
        };
        let mut dirs = vec![("", self.forward())];
        if let Some(r) = self.reverse() {
            dirs[0].0 = "[TX-C] ";
            dirs.push(("[RX-C] ", r));
        }
        for (tag, d) in dirs {
            let (t, r) = (d.seconds, d.seconds);
            if udp {
                s += &format!(
                    "{tag}[SUM]   0.00-{t:<6.2} sec  {}  {}  {:>7.3} ms  {}/{} ({:.2}%)  sender\n",
                    bytes_h(d.sent_bytes),
                    rate_h(d.sent_bps),
                    0.0,
                    0,
                    d.packets,
                    0.0
                );
                s += &format!(
                    "{tag}[SUM]   0.00-{r:<6.2} sec  {}  {}  {:>7.3} ms  {}/{} ({:.2}%)  receiver\n",
                    bytes_h(d.received_bytes),
                    rate_h(d.received_bps),
                    d.jitter_ms,
                    d.lost,
                    d.packets,
                    d.lost_percent
                );
                if d.out_of_order > 0 {
                    s += &format!(
                        "{tag}[SUM] {} datagrams received out-of-order\n",
                        d.out_of_order
                    );
                }
            } else {
                let retr = d
                    .retransmits
                    .map(|x| format!("{x:>4}"))
                    .unwrap_or_else(|| "    ".into());
                s += &format!(
                    "{tag}[SUM]   0.00-{t:<6.2} sec  {}  {}  {retr}             sender\n",
                    bytes_h(d.sent_bytes),
                    rate_h(d.sent_bps)
                );
                s += &format!(
                    "{tag}[SUM]   0.00-{r:<6.2} sec  {}  {}                  receiver\n",
                    bytes_h(d.received_bytes),
                    rate_h(d.received_bps)
                );
            }
        }
        s += &format!(
            "CPU Utilization: local/{} {:.1}% ({:.1}%u/{:.1}%s), remote/{} {:.1}% ({:.1}%u/{:.1}%s)\n",
            if self.client { "sender" } else { "receiver" },
            self.cpu_local.total,
            self.cpu_local.user,
            self.cpu_local.system,
            if self.client { "receiver" } else { "sender" },
            self.cpu_remote.total,
            self.cpu_remote.user,
            self.cpu_remote.system
        );
        s
    }

    /// iperf3's -J shape: start, intervals, end.
    pub fn to_json(&self) -> Value {
        let p = &self.params;
        let udp = self.protocol == Protocol::Udp;
        let entry = |bytes: u64, secs: f64, sender: bool| json!({"start": 0, "end": secs, "seconds": secs, "bytes": bytes, "bits_per_second": if secs > 0.0 { bytes as f64 * 8.0 / secs } else { 0.0 }, "sender": sender});
        let mut streams = Vec::new();
        for s in &self.pairs {
            if udp {
                let mut u = entry(s.receiver_bytes, s.receiver_seconds, false);
                u["socket"] = json!(s.id);
                u["jitter_ms"] = json!(s.jitter_ms);
                u["lost_packets"] = json!(s.lost);
                u["packets"] = json!(s.packets);
                u["lost_percent"] = json!(if s.packets > 0 {
                    100.0 * s.lost as f64 / s.packets as f64
                } else {
                    0.0
                });
                u["out_of_order"] = json!(s.out_of_order);
                streams.push(json!({"udp": u}));
            } else {
                let mut snd = entry(s.sender_bytes, s.sender_seconds, true);
                snd["socket"] = json!(s.id);
                snd["retransmits"] = json!(s.retransmits.map(|x| x as i64).unwrap_or(-1));
                let mut rcv = entry(s.receiver_bytes, s.receiver_seconds, false);
                rcv["socket"] = json!(s.id);
                streams.push(json!({"sender": snd, "receiver": rcv}));
            }
        }
        let sums = |d: &DirectionSum| {
            let mut sent = entry(d.sent_bytes, d.seconds, true);
            if let Some(r) = d.retransmits {
                sent["retransmits"] = json!(r);
            }
            let received = entry(d.received_bytes, d.seconds, false);
            let mut sum = entry(d.received_bytes, d.seconds, false);
            sum["jitter_ms"] = json!(d.jitter_ms);
            sum["lost_packets"] = json!(d.lost);
            sum["packets"] = json!(d.packets);
            sum["lost_percent"] = json!(d.lost_percent);
            sum["out_of_order"] = json!(d.out_of_order);
            (sent, received, sum)
        };
        let (sent, received, sum) = sums(&self.forward());
        let mut end = json!({
            "streams": streams,
            "sum_sent": sent,
            "sum_received": received,
            "cpu_utilization_percent": {
                "host_total": self.cpu_local.total, "host_user": self.cpu_local.user, "host_system": self.cpu_local.system,
                "remote_total": self.cpu_remote.total, "remote_user": self.cpu_remote.user, "remote_system": self.cpu_remote.system
            },
        });
        if udp {
            end["sum"] = sum;
        }
        if let Some(r) = self.reverse() {
            let (s2, r2, sum2) = sums(&r);
            end["sum_sent_bidir_reverse"] = s2;
            end["sum_received_bidir_reverse"] = r2;
            if udp {
                end["sum_bidir_reverse"] = sum2;
            }
        }
        let intervals: Vec<Value> = self
            .intervals
            .iter()
            .map(|iv| {
                let secs = iv.end - iv.start;
                let ss: Vec<Value> = iv.streams.iter().map(|(id, b, snd)| json!({"socket": id, "start": iv.start, "end": iv.end, "seconds": secs, "bytes": b, "bits_per_second": *b as f64 * 8.0 / secs.max(1e-9), "omitted": iv.omitted, "sender": snd})).collect();
                let total: u64 = iv.streams.iter().map(|s| s.1).sum();
                json!({"streams": ss, "sum": {"start": iv.start, "end": iv.end, "seconds": secs, "bytes": total, "bits_per_second": total as f64 * 8.0 / secs.max(1e-9), "omitted": iv.omitted}})
            })
            .collect();
        json!({
            "start": {
                "connected": self.pairs.iter().map(|s| json!({"socket": s.id, "local_host": self.local, "remote_host": self.remote})).collect::<Vec<_>>(),
                "version": self.version,
                "system_info": "tunbench",
                "timestamp": {"timesecs": self.timestamp},
                "test_start": {
                    "protocol": self.protocol.as_str(), "num_streams": p.parallel, "blksize": p.len, "omit": p.omit,
                    "duration": p.time, "bytes": p.bytes, "blocks": p.blocks, "reverse": p.reverse as i32, "tos": 0,
                    "target_bitrate": p.rate, "bidir": p.bidir as i32
                }
            },
            "intervals": intervals,
            "end": end,
        })
    }
}

/// Bytes in iperf3's binary units: "1.10 GBytes".
pub fn bytes_h(b: u64) -> String {
    let b = b as f64;
    let (v, u) = if b >= 1024.0 * 1024.0 * 1024.0 {
        (b / (1024.0 * 1024.0 * 1024.0), "GBytes")
    } else if b >= 1024.0 * 1024.0 {
        (b / (1024.0 * 1024.0), "MBytes")
    } else if b >= 1024.0 {
        (b / 1024.0, "KBytes")
    } else {
        (b, "Bytes")
    };
    format!("{v:>6.2} {u:<6}")
}

/// Rates in decimal units: "9.42 Gbits/sec".
pub fn rate_h(bps: f64) -> String {
    let (v, u) = if bps >= 1e9 {
        (bps / 1e9, "Gbits/sec")
    } else if bps >= 1e6 {
        (bps / 1e6, "Mbits/sec")
    } else if bps >= 1e3 {
        (bps / 1e3, "Kbits/sec")
    } else {
        (bps, "bits/sec")
    };
    format!("{v:>6.2} {u:<9}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(id: u32, sending: bool, bytes: u64) -> StreamOutcome {
        StreamOutcome {
            id,
            sending,
            bytes,
            seconds: 2.0,
            ..Default::default()
        }
    }

    fn remote(streams: &[(u32, u64)]) -> ExchangedResults {
        ExchangedResults {
            streams: streams
                .iter()
                .map(|&(id, bytes)| StreamResult {
                    id,
                    bytes,
                    retransmits: -1,
                    jitter: 0.0,
                    errors: 0,
                    omitted_errors: 0,
                    packets: 0,
                    omitted_packets: 0,
                    start_time: 0.0,
                    end_time: 2.0,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn report(params: TestParams, local: &[StreamOutcome], r: &ExchangedResults) -> TestReport {
        TestReport {
            client: true,
            protocol: params.protocol,
            pairs: TestReport::build(true, &params, local, r),
            params,
            local: "a".into(),
            remote: "b".into(),
            cpu_local: CpuUtil::default(),
            cpu_remote: CpuUtil::default(),
            intervals: vec![],
            version: "t".into(),
            timestamp: 0,
        }
    }

    #[test]
    fn sender_and_receiver_bytes_come_from_the_right_ends() {
        let p = TestParams {
            time: 2,
            parallel: 2,
            ..Default::default()
        };
        let r = report(
            p,
            &[outcome(1, true, 1000), outcome(3, true, 3000)],
            &remote(&[(1, 990), (3, 2990)]),
        );
        let f = r.forward();
        assert_eq!((f.sent_bytes, f.received_bytes, f.streams), (4000, 3980, 2));
        assert_eq!(f.sent_bps, 4000.0 * 8.0 / 2.0);
        let j = r.to_json();
        assert_eq!(j["end"]["sum_sent"]["bytes"], 4000);
        assert_eq!(j["end"]["sum_received"]["bytes"], 3980);
        assert_eq!(j["end"]["streams"][1]["receiver"]["bytes"], 2990);
    }

    #[test]
    fn reverse_and_bidir_directions() {
        let p = TestParams {
            time: 2,
            reverse: true,
            ..Default::default()
        };
        let r = report(p, &[outcome(1, false, 500)], &remote(&[(1, 510)]));
        assert_eq!(
            (r.forward().sent_bytes, r.forward().received_bytes),
            (510, 500)
        );
        let p = TestParams {
            time: 2,
            bidir: true,
            ..Default::default()
        };
        let r = report(
            p,
            &[outcome(1, true, 100), outcome(3, false, 200)],
            &remote(&[(1, 99), (3, 201)]),
        );
        assert_eq!(
            (r.forward().sent_bytes, r.forward().received_bytes),
            (100, 99)
        );
        let rv = r.reverse().unwrap();
        assert_eq!((rv.sent_bytes, rv.received_bytes), (201, 200));
        assert_eq!(
            r.to_json()["end"]["sum_received_bidir_reverse"]["bytes"],
            200
        );
    }

    #[test]
    fn units_like_iperf3() {
        assert_eq!(
            bytes_h(1024 * 1024 * 1024 + 1024 * 1024 * 100).trim(),
            "1.10 GBytes"
        );
        assert_eq!(rate_h(9.42e9).trim(), "9.42 Gbits/sec");
    }
}
