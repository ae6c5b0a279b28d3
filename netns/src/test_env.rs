//! Environment variables only the test suite sets (a state directory of its own,
//! the tunbench binary to start, a slowed `up`). They change where root keeps
//! its records and which programs root runs, so a user who reaches root through
//! sudo must not be able to set them: under sudo they are ignored, with a warning.
//! The test suite runs its release builds as root without sudo, so a build
//! flag (debug assertions) cannot tell the two apart, and the sudo marker can.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::sync::Mutex;

/// The variables sudo sets for the command it runs.
const SUDO_MARKERS: [&str; 2] = ["SUDO_UID", "SUDO_USER"];

/// The value of the test-only variable `name`, unless this process runs under
/// sudo; then None, and a warning on stderr (once per variable).
pub fn var_os(name: &str) -> Option<OsString> {
    let value = std::env::var_os(name)?;
    match honoured(SUDO_MARKERS.iter().any(|m| std::env::var_os(m).is_some())) {
        true => Some(value),
        false => {
            warn_once(name);
            None
        }
    }
}

/// Whether test-only variables count, given whether sudo started us.
fn honoured(under_sudo: bool) -> bool {
    !under_sudo
}

fn warn_once(name: &str) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.insert(name.to_string()) {
        eprintln!(
            "tunbench: warning: ignoring {name}: it is for the test suite only, and this runs under sudo (SUDO_UID/SUDO_USER set)"
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sudo_turns_test_variables_off() {
        assert!(super::honoured(false));
        assert!(!super::honoured(true));
    }
}
