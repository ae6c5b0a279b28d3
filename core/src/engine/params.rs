//! The test parameters a client sends and a server checks (the PARAM_EXCHANGE JSON).

use super::protocol::{self, ierr};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TestParams {
    pub protocol: Protocol,
    /// Seconds at the start whose traffic is not counted.
    pub omit: u32,
    /// Seconds; 0 when the test ends by bytes or blocks.
    pub time: u32,
    /// Bytes to send (-n), 0 for none.
    pub bytes: u64,
    /// Blocks to send (-k), 0 for none.
    pub blocks: u64,
    pub parallel: u32,
    /// -R: the server sends.
    pub reverse: bool,
    /// --bidir: both send.
    pub bidir: bool,
    /// Bytes per write (TCP) or per datagram (UDP).
    pub len: u32,
    /// Target rate in bit/s per stream; 0 is unlimited.
    pub rate: u64,
    pub pacing_timer_us: u32,
    pub udp_counters_64bit: bool,
    pub window: Option<u32>,
    pub congestion: Option<String>,
    pub client_version: Option<String>,
}

impl Default for TestParams {
    fn default() -> Self {
        TestParams {
            protocol: Protocol::Tcp,
            omit: 0,
            time: 10,
            bytes: 0,
            blocks: 0,
            parallel: 1,
            reverse: false,
            bidir: false,
            len: protocol::DEFAULT_TCP_BLOCK,
            rate: 0,
            pacing_timer_us: 1000,
            udp_counters_64bit: false,
            window: None,
            congestion: None,
            client_version: None,
        }
    }
}

/// The most a server grants one test, which bounds what a test holds in memory:
/// a thread, two sockets and their buffers per stream, and an interval record
/// (about 24 bytes) per stream per second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Streams each way (-P); --bidir opens twice as many.
    pub max_streams: u32,
    /// Seconds of test time plus omitted time (-t, -O); also how long a test that
    /// ends by bytes or blocks (-n, -k) may run.
    pub max_duration: u32,
    /// Streams times seconds (one interval record each): -P 8 -t 60 is 480.
    pub max_interval_records: u64,
    /// Socket buffer bytes (-w); the namespace's net.core.rmem_max and wmem_max
    /// cap what the kernel grants below this.
    pub max_window: u32,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_streams: protocol::MAX_STREAMS,
            max_duration: protocol::MAX_TIME as u32,
            max_interval_records: 250_000,
            max_window: protocol::MAX_WINDOW,
        }
    }
}

/// Why a server refuses parameters: iperf3's i_errno and words for our own output.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ParamError {
    pub ierr: i32,
    pub message: String,
}

fn perr(ierr: i32, message: impl Into<String>) -> ParamError {
    ParamError {
        ierr,
        message: message.into(),
    }
}

impl TestParams {
    /// The JSON a client sends. Flags are left out rather than sent as false: 3.12
    /// servers test only whether a key is present.
    pub fn to_json(&self, version: &str) -> Value {
        let mut m = Map::new();
        m.insert(
            if self.protocol == Protocol::Tcp {
                "tcp"
            } else {
                "udp"
            }
            .into(),
            json!(true),
        );
        m.insert("omit".into(), json!(self.omit));
        m.insert("time".into(), json!(self.time));
        m.insert("num".into(), json!(self.bytes));
        m.insert("blockcount".into(), json!(self.blocks));
        m.insert("parallel".into(), json!(self.parallel));
        if self.reverse {
            m.insert("reverse".into(), json!(true));
        }
        if self.bidir {
            m.insert("bidirectional".into(), json!(true));
        }
        if let Some(w) = self.window {
            m.insert("window".into(), json!(w));
        }
        m.insert("len".into(), json!(self.len));
        if self.rate > 0 || self.protocol == Protocol::Udp {
            m.insert("bandwidth".into(), json!(self.rate));
        }
        m.insert("pacing_timer".into(), json!(self.pacing_timer_us));
        if let Some(c) = &self.congestion {
            m.insert("congestion".into(), json!(c));
        }
        if self.udp_counters_64bit {
            m.insert("udp_counters_64bit".into(), json!(1));
        }
        m.insert("client_version".into(), json!(version));
        Value::Object(m)
    }

    /// What a server accepts. Unknown keys are ignored (newer clients send more).
    pub fn from_json(v: &Value) -> Result<TestParams, ParamError> {
        let m = Fields(
            v.as_object()
                .ok_or_else(|| perr(ierr::RECV_PARAMS, "parameters are not a JSON object"))?,
        );
        let protocol = if m.flag("udp") {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let (time, omit) = m.time_and_omit()?;
        let parallel = m.parallel()?;
        let len = m.block_len(protocol)?;
        let bytes = m.unsigned("num", 0)?;
        let blocks = m.unsigned("blockcount", 0)?;
        let default_rate = if protocol == Protocol::Udp {
            protocol::DEFAULT_UDP_RATE as i64
        } else {
            0
        };
        let rate = m.unsigned("bandwidth", default_rate)?;
        let window = m.window()?;
        Ok(TestParams {
            protocol,
            omit,
            time,
            bytes,
            blocks,
            parallel,
            reverse: m.flag("reverse"),
            bidir: m.flag("bidirectional"),
            len,
            rate,
            pacing_timer_us: m.int("pacing_timer", 1000)?.clamp(1, 1_000_000) as u32,
            udp_counters_64bit: m.flag("udp_counters_64bit"),
            window,
            congestion: m.string("congestion"),
            client_version: m.string("client_version"),
        })
    }

    /// Parameters within what this server grants, or why not, in iperf3's terms
    /// (the client hears the i_errno; the server's log has the words).
    pub fn check_limits(&self, l: &ServerLimits) -> Result<(), ParamError> {
        if self.parallel > l.max_streams {
            return Err(perr(
                ierr::NUM_STREAMS,
                format!(
                    "{} parallel streams; this server takes at most {} (--max-streams)",
                    self.parallel, l.max_streams
                ),
            ));
        }
        let seconds = self.time as u64 + self.omit as u64;
        if seconds > l.max_duration as u64 {
            return Err(perr(
                ierr::DURATION,
                format!(
                    "a test of {seconds} s (time plus omit); this server takes at most {} s (--max-duration)",
                    l.max_duration
                ),
            ));
        }
        // A test that ends by bytes or blocks is not refused: it is ended when its
        // records reach the limit (`seconds_allowed`).
        let records = self.total_streams() as u64 * (seconds + 1);
        if self.time > 0 && records > l.max_interval_records {
            return Err(perr(
                ierr::DURATION,
                format!(
                    "{} streams for {} s make {records} interval records; this server keeps at most {} (--max-interval-records)",
                    self.total_streams(),
                    records / self.total_streams() as u64,
                    l.max_interval_records
                ),
            ));
        }
        if let Some(w) = self.window.filter(|w| *w > l.max_window) {
            return Err(perr(
                ierr::BUF_SIZE,
                format!(
                    "a window of {w} bytes; this server takes at most {} (--max-window)",
                    l.max_window
                ),
            ));
        }
        Ok(())
    }

    /// How long the server lets this test run: its time and omit, or for a test
    /// that ends by bytes or blocks, as long as the limits allow.
    pub fn seconds_allowed(&self, l: &ServerLimits) -> u64 {
        if self.time > 0 {
            return self.time as u64 + self.omit as u64;
        }
        let by_records = l.max_interval_records / self.total_streams().max(1) as u64;
        by_records
            .min(l.max_duration as u64)
            .saturating_sub(1)
            .max(1)
    }

    /// Streams each side opens: --bidir doubles them.
    pub fn total_streams(&self) -> u32 {
        if self.bidir {
            self.parallel * 2
        } else {
            self.parallel
        }
    }

    /// Whether the client's stream number `i` (0-based, in opening order) is one the
    /// client sends on.
    pub fn client_sends_on(&self, i: u32) -> bool {
        if self.bidir {
            i < self.parallel
        } else {
            !self.reverse
        }
    }
}

/// The PARAM_EXCHANGE object's keys, read as a server reads them.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    /// A flag counts as set when present, as 3.12 has it, unless it is literally false.
    fn flag(&self, k: &str) -> bool {
        self.0.get(k).is_some_and(|x| *x != Value::Bool(false))
    }

    fn int(&self, k: &str, default: i64) -> Result<i64, ParamError> {
        match self.0.get(k) {
            None | Some(Value::Null) => Ok(default),
            Some(x) => x
                .as_i64()
                .or_else(|| x.as_u64().map(|u| u.min(i64::MAX as u64) as i64))
                .ok_or_else(|| {
                    perr(
                        ierr::RECV_PARAMS,
                        format!("parameter {k} is not an integer: {x}"),
                    )
                }),
        }
    }

    /// An integer that must not be negative.
    fn unsigned(&self, k: &str, default: i64) -> Result<u64, ParamError> {
        let x = self.int(k, default)?;
        if x < 0 {
            Err(perr(
                ierr::RECV_PARAMS,
                format!("parameter {k} is negative: {x}"),
            ))
        } else {
            Ok(x as u64)
        }
    }

    fn string(&self, k: &str) -> Option<String> {
        self.0.get(k).and_then(|c| c.as_str()).map(String::from)
    }

    /// Test time and omitted time, seconds, each within MAX_TIME.
    fn time_and_omit(&self) -> Result<(u32, u32), ParamError> {
        let time = self.int("time", 10)?;
        let omit = self.int("omit", 0)?;
        if !(0..=protocol::MAX_TIME).contains(&time) || !(0..=protocol::MAX_TIME).contains(&omit) {
            return Err(perr(
                ierr::DURATION,
                format!(
                    "test time {time} s / omit {omit} s out of range 0..={}",
                    protocol::MAX_TIME
                ),
            ));
        }
        Ok((time as u32, omit as u32))
    }

    fn parallel(&self) -> Result<u32, ParamError> {
        let parallel = self.int("parallel", 1)?;
        if !(1..=protocol::MAX_STREAMS as i64).contains(&parallel) {
            return Err(perr(
                ierr::NUM_STREAMS,
                format!(
                    "{parallel} parallel streams; 1..={} allowed",
                    protocol::MAX_STREAMS
                ),
            ));
        }
        Ok(parallel as u32)
    }

    /// Bytes per write or datagram, within what `protocol` allows.
    fn block_len(&self, protocol: Protocol) -> Result<u32, ParamError> {
        let (lo, hi, dflt) = match protocol {
            Protocol::Tcp => (
                1,
                protocol::MAX_BLOCK as i64,
                protocol::DEFAULT_TCP_BLOCK as i64,
            ),
            Protocol::Udp => (
                protocol::MIN_UDP_BLOCK as i64,
                protocol::MAX_UDP_BLOCK as i64,
                1460,
            ),
        };
        let len = self.int("len", dflt)?;
        if !(lo..=hi).contains(&len) {
            return Err(perr(
                ierr::BLOCK_SIZE,
                format!(
                    "block length {len} out of range {lo}..={hi} for {}",
                    protocol.as_str()
                ),
            ));
        }
        Ok(len as u32)
    }

    fn window(&self) -> Result<Option<u32>, ParamError> {
        Ok(match self.int("window", 0)? {
            0 => None,
            w if w > 0 && w <= i32::MAX as i64 => Some(w as u32),
            w => return Err(perr(ierr::RECV_PARAMS, format!("window {w} out of range"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_iperf3_3_12_sends() {
        // Captured from Debian 12's iperf3 -c -P 2 -t 2.
        let v: Value = serde_json::from_str(r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":2,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#).unwrap();
        let p = TestParams::from_json(&v).unwrap();
        assert_eq!(p.protocol, Protocol::Tcp);
        assert_eq!((p.time, p.parallel, p.len, p.rate), (2, 2, 131072, 0));
        assert!(!p.reverse && !p.bidir);
        assert_eq!(p.client_version.as_deref(), Some("3.12"));
    }

    #[test]
    fn round_trips_and_leaves_false_flags_out() {
        let p = TestParams {
            protocol: Protocol::Udp,
            reverse: true,
            udp_counters_64bit: true,
            rate: 5_000_000,
            len: 1448,
            ..Default::default()
        };
        let j = p.to_json("tunbench");
        assert!(j.get("bidirectional").is_none());
        assert_eq!(j["udp"], true);
        let back = TestParams::from_json(&j).unwrap();
        assert_eq!(
            back,
            TestParams {
                client_version: Some("tunbench".into()),
                ..p
            }
        );
    }

    #[test]
    fn absurd_values_are_refused_with_iperf3_codes() {
        let bad = |s: &str| {
            TestParams::from_json(&serde_json::from_str(s).unwrap())
                .unwrap_err()
                .ierr
        };
        assert_eq!(
            bad(r#"{"tcp":true,"parallel":100000,"len":1}"#),
            ierr::NUM_STREAMS
        );
        assert_eq!(
            bad(r#"{"tcp":true,"parallel":1,"len":0}"#),
            ierr::BLOCK_SIZE
        );
        assert_eq!(bad(r#"{"udp":true,"len":8}"#), ierr::BLOCK_SIZE);
        assert_eq!(bad(r#"{"tcp":true,"time":-1}"#), ierr::DURATION);
        assert_eq!(bad(r#"{"tcp":true,"time":"ten"}"#), ierr::RECV_PARAMS);
        assert_eq!(bad(r#"[1,2]"#), ierr::RECV_PARAMS);
        assert_eq!(bad(r#"{"tcp":true,"num":-5}"#), ierr::RECV_PARAMS);
        // Unknown keys are fine.
        assert!(
            TestParams::from_json(&serde_json::json!({"tcp": true, "gso": 1, "mptcp": true}))
                .is_ok()
        );
    }

    #[test]
    fn limits_refuse_with_iperf3_codes_and_bound_byte_tests() {
        let l = ServerLimits {
            max_streams: 4,
            max_duration: 100,
            max_interval_records: 50,
            max_window: 1 << 20,
        };
        let p = |s: &str| TestParams::from_json(&serde_json::from_str(s).unwrap()).unwrap();
        let code = |s: &str| p(s).check_limits(&l).unwrap_err().ierr;
        assert_eq!(code(r#"{"tcp":true,"parallel":5}"#), ierr::NUM_STREAMS);
        assert_eq!(code(r#"{"tcp":true,"time":90,"omit":11}"#), ierr::DURATION);
        assert_eq!(
            code(r#"{"tcp":true,"time":6,"parallel":4,"bidirectional":true}"#),
            ierr::DURATION
        );
        assert_eq!(code(r#"{"tcp":true,"window":2000000}"#), ierr::BUF_SIZE);
        let ok = p(r#"{"tcp":true,"time":5,"parallel":4,"bidirectional":true}"#);
        assert_eq!(ok.check_limits(&l), Ok(()));
        assert_eq!(ok.seconds_allowed(&l), 5);
        // -n with 4 streams: 50 records last 12 s, less the partial last one.
        let bytes = p(r#"{"tcp":true,"time":0,"num":1000,"parallel":4}"#);
        assert_eq!(bytes.check_limits(&l), Ok(()));
        assert_eq!(bytes.seconds_allowed(&l), 11);
        let msg = p(r#"{"tcp":true,"parallel":5}"#)
            .check_limits(&l)
            .unwrap_err()
            .message;
        assert!(msg.contains("--max-streams"), "{msg}");
    }

    #[test]
    fn bidir_stream_roles() {
        let p = TestParams {
            parallel: 2,
            bidir: true,
            ..Default::default()
        };
        assert_eq!(p.total_streams(), 4);
        assert_eq!(
            (0..4).map(|i| p.client_sends_on(i)).collect::<Vec<_>>(),
            [true, true, false, false]
        );
        let r = TestParams {
            reverse: true,
            ..Default::default()
        };
        assert!(!r.client_sends_on(0));
    }
}
