//! iperf3's control protocol vocabulary: state bytes, the cookie, and the framing
//! of JSON messages (as iperf3 3.x speaks it: a 4-byte big-endian length, then
//! the JSON).

/// Control, TCP data and UDP data all use this port by default.
pub const DEFAULT_PORT: u16 = 5201;
pub const COOKIE_LEN: usize = 37;
const COOKIE_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz234567";
/// 3.18+ servers refuse longer parameter messages; so do we.
pub const MAX_PARAMS_JSON: usize = 8 * 1024;
/// Results carry per-stream entries for up to 128 streams; bound them generously.
pub const MAX_RESULTS_JSON: usize = 1 << 20;
pub const MAX_STREAMS: u32 = 128;
pub const MAX_BLOCK: u32 = 1 << 20;
pub const MAX_UDP_BLOCK: u32 = 65507;
pub const MIN_UDP_BLOCK: u32 = 16;
pub const DEFAULT_TCP_BLOCK: u32 = 128 * 1024;
pub const DEFAULT_UDP_RATE: u64 = 1024 * 1024;
/// iperf3's MAX_TCP_BUFFER: the largest -w.
pub const MAX_WINDOW: u32 = 512 * 1024 * 1024;
/// iperf3's MAX_TIME: one day.
pub const MAX_TIME: i64 = 86400;
/// The UDP stream "connect" datagram and the server's reply.
pub const UDP_CONNECT_MSG: [u8; 4] = [0x39, 0x38, 0x37, 0x36];
pub const UDP_CONNECT_REPLY: [u8; 4] = [0x36, 0x37, 0x38, 0x39];
pub const UDP_CONNECT_REPLY_LEGACY: [u8; 4] = [0xb1, 0x68, 0xde, 0x3a];

/// One signed byte on the control connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum State {
    TestStart = 1,
    TestRunning = 2,
    TestEnd = 4,
    ParamExchange = 9,
    CreateStreams = 10,
    ServerTerminate = 11,
    ClientTerminate = 12,
    ExchangeResults = 13,
    DisplayResults = 14,
    IperfDone = 16,
    AccessDenied = -1,
    ServerError = -2,
}

impl State {
    pub fn from_byte(b: u8) -> Option<State> {
        use State::*;
        Some(match b as i8 {
            1 => TestStart,
            2 => TestRunning,
            4 => TestEnd,
            9 => ParamExchange,
            10 => CreateStreams,
            11 => ServerTerminate,
            12 => ClientTerminate,
            13 => ExchangeResults,
            14 => DisplayResults,
            16 => IperfDone,
            -1 => AccessDenied,
            -2 => ServerError,
            _ => return None,
        })
    }

    pub fn byte(self) -> u8 {
        self as i8 as u8
    }
}

/// iperf3's i_errno values that a server sends with SERVER_ERROR (iperf_api.h of
/// 3.12, whose list has IESERVERONLY = 3: checked against Debian 12's iperf3, which
/// prints 5 as "test duration too long" and 114 as "unable to receive parameters").
pub mod ierr {
    pub const DURATION: i32 = 5;
    pub const NUM_STREAMS: i32 = 6;
    pub const BLOCK_SIZE: i32 = 7;
    pub const BUF_SIZE: i32 = 8;
    pub const RECV_PARAMS: i32 = 114;
}

/// A fresh cookie: 36 characters of iperf3's alphabet and a NUL.
pub fn make_cookie(seed: u64) -> [u8; COOKIE_LEN] {
    // xorshift64*: the cookie only has to differ between tests, not be secret.
    let mut x = seed | 1;
    let mut c = [0u8; COOKIE_LEN];
    for b in c.iter_mut().take(COOKIE_LEN - 1) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *b = COOKIE_CHARS[(x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 59) as usize];
    }
    c
}

pub fn random_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ ((std::process::id() as u64) << 32)
}

/// A 4-byte big-endian length, then the JSON text.
pub fn frame_json(v: &serde_json::Value) -> Vec<u8> {
    let text = serde_json::to_vec(v).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + text.len());
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(&text);
    out
}

/// One read of a control connection that has a read timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRead {
    Data(usize),
    Eof,
    /// Nothing arrived within the timeout: time to look at the clock.
    Idle,
}

pub fn read_control(mut sock: impl std::io::Read, buf: &mut [u8]) -> std::io::Result<ControlRead> {
    use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    match sock.read(buf) {
        Ok(0) => Ok(ControlRead::Eof),
        Ok(n) => Ok(ControlRead::Data(n)),
        Err(e) if matches!(e.kind(), WouldBlock | TimedOut | Interrupted) => Ok(ControlRead::Idle),
        Err(e) => Err(e),
    }
}

/// What was wrong with a JSON message on the control connection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FrameError {
    #[error("JSON message of length {0} (must be 1..={1})")]
    BadLength(usize, usize),
    #[error("JSON message is not valid: {0}")]
    BadJson(String),
}

/// Bytes received on the control connection, consumed message by message.
#[derive(Debug, Default)]
pub struct ControlBuffer {
    buf: Vec<u8>,
}

impl ControlBuffer {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn take_bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        if self.buf.len() < N {
            return None;
        }
        let mut a = [0u8; N];
        a.copy_from_slice(&self.buf[..N]);
        self.buf.drain(..N);
        Some(a)
    }

    pub fn take_byte(&mut self) -> Option<u8> {
        self.take_bytes::<1>().map(|a| a[0])
    }

    /// A length-prefixed JSON message, once all of it is here. The length is checked
    /// as soon as its four bytes arrive, so an absurd one fails without waiting.
    pub fn take_json(&mut self, max: usize) -> Option<Result<serde_json::Value, FrameError>> {
        if self.buf.len() < 4 {
            return None;
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len == 0 || len > max {
            self.buf.clear();
            return Some(Err(FrameError::BadLength(len, max)));
        }
        if self.buf.len() < 4 + len {
            return None;
        }
        let v = serde_json::from_slice(&self.buf[4..4 + len])
            .map_err(|e| FrameError::BadJson(e.to_string()));
        self.buf.drain(..4 + len);
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_is_iperf3_shaped() {
        let c = make_cookie(12345);
        assert_eq!(c[36], 0);
        assert!(c[..36].iter().all(|b| COOKIE_CHARS.contains(b)));
        assert_ne!(make_cookie(1), make_cookie(2));
    }

    #[test]
    fn states_round_trip_through_bytes() {
        for s in [
            State::TestStart,
            State::ExchangeResults,
            State::AccessDenied,
            State::ServerError,
            State::IperfDone,
        ] {
            assert_eq!(State::from_byte(s.byte()), Some(s));
        }
        assert_eq!(State::AccessDenied.byte(), 0xff);
        assert_eq!(State::ServerError.byte(), 0xfe);
        assert_eq!(State::from_byte(3), None);
    }

    #[test]
    fn json_frames_split_anywhere() {
        let v = serde_json::json!({"tcp": true, "time": 2});
        let f = frame_json(&v);
        assert_eq!(&f[..4], &(f.len() as u32 - 4).to_be_bytes());
        let mut b = ControlBuffer::default();
        for (i, byte) in f.iter().enumerate() {
            assert!(b.take_json(100).is_none(), "complete too early at {i}");
            b.push(&[*byte]);
        }
        assert_eq!(b.take_json(100), Some(Ok(v)));
        assert!(b.is_empty());
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut b = ControlBuffer::default();
        b.push(&[0, 0, 0, 0]);
        assert_eq!(b.take_json(100), Some(Err(FrameError::BadLength(0, 100))));
        b.push(&[0, 1, 0, 0]);
        assert_eq!(
            b.take_json(100),
            Some(Err(FrameError::BadLength(65536, 100)))
        );
        b.push(&[0, 0, 0, 3, b'{', b'x', b'}']);
        assert!(matches!(
            b.take_json(100),
            Some(Err(FrameError::BadJson(_)))
        ));
    }
}
