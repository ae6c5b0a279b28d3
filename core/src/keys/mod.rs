//! The keys of a lab's tunnels of every kind (WireGuard private keys and
//! preshared keys, ESP SA key material, IKEv2 PSKs and certificates): given
//! in the topology or made when the lab comes up, kept in the lab's state
//! directory (`keys.json`, mode 0600).

pub mod pki;

use crate::vocab::keys::{generate, parse, random, to_base64};

/// The keys of a lab's WireGuard, ESP and IKEv2 tunnels, kept in its state directory with
/// mode 0600: given in the topology, or made when the lab came up.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct LabKeys {
    /// tunnel -> its keys.
    pub tunnels: std::collections::BTreeMap<String, TunnelKeys>,
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TunnelKeys {
    /// node -> private key (base64).
    pub private: std::collections::BTreeMap<String, String>,
    pub preshared: Option<String>,
    /// ESP: node -> the key material (hex, 20 bytes) of the SA into it.
    #[serde(default)]
    pub sa: std::collections::BTreeMap<String, String>,
    /// IKEv2: the pre-shared key's bytes in hex (the topology's, or 32 made
    /// per lab), as swanctl.conf takes it after "0x".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub psk: Option<String>,
    /// IKEv2 with certificates: the lab CA's certificate (PEM; its key is
    /// not kept) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<String>,
    /// ... and node -> its private key and certificate.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub certs: std::collections::BTreeMap<String, EndCertificate>,
}

/// An IKEv2 end's credentials, PEM.
#[derive(Debug, Default, Clone, serde::Serialize, serde::Deserialize)]
pub struct EndCertificate {
    pub key: String,
    pub cert: String,
}

/// "sa_key of end NODE" for each end of an ESP tunnel the file gives none.
fn missing_sa_keys(
    t: &crate::topology::Topology,
    o: &crate::topology::tunnel::overlay::Overlay,
    sas: &crate::topology::tunnel::keys::Sas,
) -> Vec<String> {
    o.peers
        .iter()
        .enumerate()
        .filter(|(i, _)| sas.keys.get(*i).copied().flatten().is_none())
        .map(|(_, p)| format!("sa_key of end {}", t.nodes[p.node].name))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const KEYS_FILE: &str = "keys.json";

impl LabKeys {
    pub fn path(lab: &str) -> std::path::PathBuf {
        netns::state::LabState::dir(lab).join(KEYS_FILE)
    }

    /// Keys for every WireGuard tunnel of `t`: the topology's, else new ones.
    pub fn make(t: &crate::topology::Topology) -> std::io::Result<LabKeys> {
        use crate::topology::tunnel::TunnelKind;
        use crate::topology::tunnel::keys::Preshared;
        let mut keys = LabKeys::default();
        for tun in &t.tunnels {
            if let TunnelKind::Ikev2(e) = &tun.kind {
                use crate::topology::tunnel::ikev2::{Auth, Psk};
                let mut tk = TunnelKeys::default();
                match e.auth {
                    Auth::Psk => {
                        tk.psk = Some(match &e.psk {
                            Psk::Given(s) => hex(s.as_bytes()),
                            Psk::Generate => hex(&random::<32>()?),
                        });
                    }
                    Auth::Cert => {
                        let nodes: Vec<String> = e
                            .overlay
                            .peers
                            .iter()
                            .map(|p| t.nodes[p.node].name.clone())
                            .collect();
                        let issued = crate::vocab::programs::Install::find(true)
                            .and_then(|i| pki::issue_certificates(&i.pki, &tun.name, &nodes))
                            .map_err(|e| {
                                std::io::Error::other(format!(
                                    "certificates for IKEv2 tunnel {}: {e}",
                                    tun.name
                                ))
                            })?;
                        tk.ca = Some(issued.ca);
                        for (node, key, cert) in issued.ends {
                            tk.certs.insert(node, EndCertificate { key, cert });
                        }
                    }
                }
                keys.tunnels.insert(tun.name.clone(), tk);
                continue;
            }
            let esp = match &tun.kind {
                TunnelKind::Esp(e) => Some((&e.overlay, &e.sas)),
                TunnelKind::L2tp(l) => l.ipsec.as_ref().map(|s| (&l.overlay, s)),
                _ => None,
            };
            if let Some((o, sas)) = esp {
                let mut tk = TunnelKeys::default();
                for (i, p) in o.peers.iter().enumerate() {
                    let k = match sas.keys.get(i).copied().flatten() {
                        Some(k) => k,
                        None => random::<20>()?,
                    };
                    tk.sa.insert(t.nodes[p.node].name.clone(), hex(&k));
                }
                keys.tunnels.insert(tun.name.clone(), tk);
                continue;
            }
            let TunnelKind::Wireguard(w) = &tun.kind else {
                continue;
            };
            let mut tk = TunnelKeys::default();
            // An external peer's private key stays on the device.
            for p in w.peers.iter().filter(|p| !p.external) {
                let k = match p.private_key {
                    Some(k) => k,
                    None => generate()?,
                };
                tk.private
                    .insert(t.nodes[p.node].name.clone(), to_base64(&k));
            }
            tk.preshared = match w.preshared {
                Preshared::None => None,
                Preshared::Given(k) => Some(to_base64(&k)),
                Preshared::Generate => Some(to_base64(&generate()?)),
            };
            keys.tunnels.insert(tun.name.clone(), tk);
        }
        Ok(keys)
    }

    /// Why each tunnel whose ends are on different hosts of `t`'s placement
    /// cannot come up there: a key it would make. Each host makes the keys
    /// it is not given on its own, so two ends would not agree; such a
    /// tunnel's keys must all be in the file. Empty on one machine.
    pub fn made_across_hosts(t: &crate::topology::Topology) -> Vec<String> {
        use crate::topology::tunnel::TunnelKind;
        use crate::topology::tunnel::keys::Preshared;
        let Some(pl) = &t.placement else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for tun in &t.tunnels {
            let hosts: std::collections::BTreeSet<&str> = tun
                .endpoints()
                .iter()
                .filter_map(|&(_, n, _)| pl.node_host[n].map(|h| pl.hosts[h].name.as_str()))
                .collect();
            if hosts.len() < 2 {
                continue;
            }
            let across = format!(
                "tunnel {} has ends on hosts {}, and each host makes the keys it is not given",
                tun.name,
                hosts.into_iter().collect::<Vec<_>>().join(", ")
            );
            let made = match &tun.kind {
                TunnelKind::Wireguard(w) => {
                    let mut m: Vec<String> = w
                        .peers
                        .iter()
                        .filter(|p| !p.external && p.private_key.is_none())
                        .map(|p| format!("private_key of peer {}", t.nodes[p.node].name))
                        .collect();
                    if w.preshared == Preshared::Generate {
                        m.push("preshared_key (true: made per lab)".into());
                    }
                    m
                }
                TunnelKind::Esp(e) => missing_sa_keys(t, &e.overlay, &e.sas),
                TunnelKind::L2tp(l) => l
                    .ipsec
                    .as_ref()
                    .map(|s| missing_sa_keys(t, &l.overlay, s))
                    .unwrap_or_default(),
                // The initiator's `up` waits for its SA, which the far part
                // can only answer once it is up too: not across hosts yet.
                TunnelKind::Ikev2(_) => {
                    out.push(format!(
                        "{across}: an IKEv2 tunnel cannot cross hosts yet (each end's `up` waits for the negotiation with the other); use kind = \"esp\" with an sa_key on each end, or WireGuard"
                    ));
                    continue;
                }
                _ => Vec::new(),
            };
            if !made.is_empty() {
                out.push(format!(
                    "{across}: give {} in the file (`tunbench keygen` makes a WireGuard key, `openssl rand -hex 20` an sa_key)",
                    made.join(", ")
                ));
            }
        }
        out
    }

    /// Writes the file, readable by root only.
    pub fn store(&self, lab: &str) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = Self::path(lab);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        f.write_all(serde_json::to_string_pretty(self)?.as_bytes())
    }

    pub fn load(lab: &str) -> anyhow::Result<LabKeys> {
        use anyhow::Context;
        let path = Self::path(lab);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading the lab's WireGuard keys {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    pub fn private(&self, tunnel: &str, node: &str) -> anyhow::Result<[u8; 32]> {
        let s = self
            .tunnels
            .get(tunnel)
            .and_then(|t| t.private.get(node))
            .ok_or_else(|| anyhow::anyhow!("no WireGuard key for {node} in tunnel {tunnel}"))?;
        parse(s).map_err(anyhow::Error::msg)
    }

    /// ESP: the key material of the SA into `node`.
    pub fn sa(&self, tunnel: &str, node: &str) -> anyhow::Result<[u8; 20]> {
        let s = self
            .tunnels
            .get(tunnel)
            .and_then(|t| t.sa.get(node))
            .ok_or_else(|| {
                anyhow::anyhow!("no ESP key for the SA into {node} in tunnel {tunnel}")
            })?;
        let mut k = [0u8; 20];
        if s.len() != 40 {
            anyhow::bail!("the ESP key into {node} is not 40 hex digits");
        }
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)?;
        }
        Ok(k)
    }

    /// IKEv2 with certificates: the CA's certificate and `node`'s own.
    pub fn certificates(
        &self,
        tunnel: &str,
        node: &str,
    ) -> anyhow::Result<(&str, &EndCertificate)> {
        let t = self.tunnels.get(tunnel);
        let ca = t.and_then(|t| t.ca.as_deref());
        let end = t.and_then(|t| t.certs.get(node));
        match (ca, end) {
            (Some(ca), Some(end)) => Ok((ca, end)),
            _ => anyhow::bail!("no certificate for {node} in IKEv2 tunnel {tunnel}"),
        }
    }

    /// IKEv2: the tunnel's pre-shared key, in hex.
    pub fn psk_hex(&self, tunnel: &str) -> anyhow::Result<&str> {
        self.tunnels
            .get(tunnel)
            .and_then(|t| t.psk.as_deref())
            .ok_or_else(|| anyhow::anyhow!("no pre-shared key for IKEv2 tunnel {tunnel}"))
    }

    pub fn preshared(&self, tunnel: &str) -> Option<[u8; 32]> {
        self.tunnels
            .get(tunnel)
            .and_then(|t| t.preshared.as_deref())
            .and_then(|s| parse(s).ok())
    }
}
