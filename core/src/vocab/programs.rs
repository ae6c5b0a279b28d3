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
    /// What the paths are under.
    prefix: PathBuf,
}

impl Install {
    /// Where Debian's packages put strongSwan's programs, whether or not they
    /// are there.
    pub fn expected() -> Install {
        let prefix = netns::test_env::var_os(PREFIX_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"));
        Install {
            charon: prefix.join("usr/lib/ipsec/charon"),
            swanctl: prefix.join("usr/sbin/swanctl"),
            pki: prefix.join("usr/bin/pki"),
            prefix,
        }
    }

    /// The installed strongSwan (with `pki` when `certificates`), or what is
    /// missing and how to install it.
    pub fn find(certificates: bool) -> Result<Install, String> {
        let install = Install::expected();
        let at = |p: &str| install.prefix.join(p);
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
            "an IKEv2 tunnel runs strongSwan's charon, and strongSwan is not installed: missing {}; install it with `apt-get install {packages}` (scripts/setup.sh does)",
            missing.join(", ")
        ))
    }
}
