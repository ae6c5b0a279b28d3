//! The results each side sends the other at EXCHANGE_RESULTS.

use serde::{Deserialize, Deserializer, Serialize};

/// One stream's totals as exchanged. -1 means "not known" (retransmits of a
/// receiver); 3.12 and 3.13 print it as u64::MAX, which parses back to -1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub id: u32,
    #[serde(deserialize_with = "lenient_u64")]
    pub bytes: u64,
    #[serde(deserialize_with = "lenient_i64")]
    pub retransmits: i64,
    /// Seconds.
    #[serde(default)]
    pub jitter: f64,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub errors: i64,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub omitted_errors: i64,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub packets: i64,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub omitted_packets: i64,
    #[serde(default)]
    pub start_time: f64,
    #[serde(default)]
    pub end_time: f64,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ExchangedResults {
    #[serde(default)]
    pub cpu_util_total: f64,
    #[serde(default)]
    pub cpu_util_user: f64,
    #[serde(default)]
    pub cpu_util_system: f64,
    #[serde(default, deserialize_with = "lenient_i64")]
    pub sender_has_retransmits: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    #[serde(default)]
    pub streams: Vec<StreamResult>,
}

fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(match v {
        serde_json::Value::Number(n) => n.as_i64().unwrap_or(-1),
        _ => -1,
    })
}

fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(v.as_u64().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_iperf3_3_12_results_with_u64_max_as_minus_one() {
        let s = r#"{"cpu_util_total":1.5,"cpu_util_user":0.5,"cpu_util_system":1.0,"sender_has_retransmits":18446744073709551615,"streams":[{"id":1,"bytes":12345,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.000047}]}"#;
        let r: ExchangedResults = serde_json::from_str(s).unwrap();
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.streams[0].bytes, 12345);
        assert_eq!(r.streams[0].omitted_packets, 0);
    }
}
