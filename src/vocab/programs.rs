//! The programs tunbench runs that a machine may lack, where Debian installs
//! them and which package has each: strongSwan for IKEv2 tunnels.

use std::path::PathBuf;

/// Where to look for strongSwan instead of `/` (a test makes it missing; a
/// test-only variable, ignored under sudo, where it would choose what root runs).
pub const PREFIX_ENV: &str = "TUNBENCH_STRONGSWAN_PREFIX";

/// The Debian packages an IKEv2 tunnel needs.
pub const PACKAGES: &str =
    "strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins";
/// And one with certificates (`pki` issues them).
pub const PKI_PACKAGE: &str = "strongswan-pki";

/// The files of an installed strongSwan.
#[derive(Debug, Clone)]
pub struct Install {
    pub charon: PathBuf,
    pub swanctl: PathBuf,
    pub pki: PathBuf,
}

impl Install {
    /// The installed strongSwan (with `pki` when `certificates`), or what is
    /// missing and how to install it.
    pub fn find(certificates: bool) -> Result<Install, String> {
        let prefix = netns::test_env::var_os(PREFIX_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        let at = |p: &str| prefix.join(p);
        let install = Install {
            charon: at("usr/lib/ipsec/charon"),
            swanctl: at("usr/sbin/swanctl"),
            pki: at("usr/bin/pki"),
        };
        let mut needed = vec![
            (install.charon.clone(), "strongswan-charon"),
            (install.swanctl.clone(), "strongswan-swanctl"),
            (
                at("usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so"),
                "libcharon-extra-plugins",
            ),
            (
                at("usr/lib/ipsec/plugins/libstrongswan-openssl.so"),
                "libstrongswan-standard-plugins",
            ),
        ];
        let mut packages = PACKAGES.to_string();
        if certificates {
            needed.push((install.pki.clone(), PKI_PACKAGE));
            packages = format!("{packages} {PKI_PACKAGE}");
        }
        let missing: Vec<String> = needed
            .iter()
            .filter(|(p, _)| !p.is_file())
            .map(|(p, pkg)| format!("{} ({pkg})", p.display()))
            .collect();
        if missing.is_empty() {
            return Ok(install);
        }
        Err(format!(
            "an IKEv2 tunnel runs strongSwan's charon with userspace ESP, and strongSwan is not installed: missing {}; install it with `apt-get install {packages}` (scripts/setup.sh does)",
            missing.join(", ")
        ))
    }
}
