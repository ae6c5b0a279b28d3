//! `tunbench completions SHELL` and `tunbench manpages DIR`: shell completion
//! scripts and man pages generated from the clap definitions of [`super::Cli`]
//! (clap_complete, clap_mangen), so they say what `--help` says. The Debian
//! package ships both (scripts/package.sh); a build from source prints them.

use super::Cli;
use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;
use std::path::{Path, PathBuf};

/// Where each shell looks for a completion file, shown in `completions --help`.
const WHERE_TO_PUT_IT: &str = "\
Where to put the script (a new shell loads it):
  bash: tunbench completions bash > ~/.local/share/bash-completion/completions/tunbench
  zsh:  tunbench completions zsh > ~/.zfunc/_tunbench
        (with `fpath=(~/.zfunc $fpath)` before `compinit` in ~/.zshrc)
  fish: tunbench completions fish > ~/.config/fish/completions/tunbench.fish
For every user (as root): /usr/local/share/bash-completion/completions/tunbench,
/usr/local/share/zsh/site-functions/_tunbench,
/usr/local/share/fish/vendor_completions.d/tunbench.fish.
The Debian package installs the bash, zsh and fish scripts itself.";

/// The man pages' footer: what they document.
const SOURCE: &str = concat!("tunbench ", env!("CARGO_PKG_VERSION"));

#[derive(clap::Args, Debug)]
#[command(after_long_help = WHERE_TO_PUT_IT)]
pub struct CompletionsArgs {
    /// The shell to complete tunbench's subcommands and flags in.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManpagesArgs {
    /// The directory to write tunbench.1 and tunbench-SUBCOMMAND.1 to
    /// (created if missing).
    pub dir: PathBuf,
}

/// The command: the completion script for `a.shell` on stdout.
pub fn completions(a: CompletionsArgs) -> anyhow::Result<i32> {
    use std::io::Write;
    std::io::stdout().write_all(&completion_script(a.shell))?;
    Ok(0)
}

/// The command: writes the man pages and prints the path of each.
pub fn manpages(a: ManpagesArgs) -> anyhow::Result<i32> {
    for page in write_manpages(&a.dir)? {
        println!("{}", page.display());
    }
    Ok(0)
}

/// tunbench's completion script for `shell`.
pub fn completion_script(shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut completed_command(), "tunbench", &mut script);
    script
}

/// [`Cli`]'s command without its hidden subcommands: clap_complete offers
/// every subcommand, hidden or not (unlike `--help` and clap_mangen), and
/// clap has no way to remove one, so the root is put together again from
/// Cli's own arguments and visible subcommands.
fn completed_command() -> clap::Command {
    let cli = Cli::command();
    let mut root = clap::Command::new("tunbench")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cli.get_arguments().cloned())
        .subcommands(cli.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = cli.get_about() {
        root = root.about(about.clone());
    }
    root
}

/// Writes tunbench.1 and a page per visible subcommand, nested ones
/// included (tunbench-gen-chain.1), into `dir`, creating it if missing: the
/// files written. Hidden subcommands get no page.
pub fn write_manpages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating the man page directory {}", dir.display()))?;
    // Built, a subcommand knows its full name (tunbench-up) and the help
    // subcommand, which needs no page, is left out.
    let mut top = Cli::command().disable_help_subcommand(true);
    top.build();
    let mut written = Vec::new();
    let mut pending = vec![top];
    while let Some(cmd) = pending.pop() {
        pending.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
        let man = clap_mangen::Man::new(cmd).source(SOURCE);
        let path = dir.join(man.get_filename());
        let mut page = Vec::new();
        man.render(&mut page)
            .with_context(|| format!("rendering {}", path.display()))?;
        std::fs::write(&path, page)
            .with_context(|| format!("writing the man page {}", path.display()))?;
        written.push(path);
    }
    written.sort();
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every subcommand `tunbench --help` lists (and those under them), by
    /// its full name: "up", "gen chain".
    fn visible_subcommands() -> Vec<Vec<String>> {
        fn walk(cmd: &clap::Command, path: &[String], out: &mut Vec<Vec<String>>) {
            for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                let mut p = path.to_vec();
                p.push(s.get_name().to_string());
                walk(s, &p, out);
                out.push(p);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), &[], &mut out);
        out
    }

    #[test]
    fn every_visible_subcommand_has_a_man_page_and_hidden_ones_none() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("new").join("man1");
        let written = write_manpages(&out).unwrap();
        let subcommands = visible_subcommands();
        assert!(subcommands.len() > 15, "{subcommands:?}");
        assert!(subcommands.contains(&vec!["gen".to_string(), "chain".to_string()]));
        assert_eq!(written.len(), subcommands.len() + 1, "{written:?}");
        let top = std::fs::read_to_string(out.join("tunbench.1")).unwrap();
        assert!(top.starts_with(".ie"), "{top}");
        assert!(top.contains(".TH tunbench 1"), "{top}");
        for sub in &subcommands {
            let name = format!("tunbench-{}", sub.join("-"));
            let page = std::fs::read_to_string(out.join(format!("{name}.1")))
                .unwrap_or_else(|e| panic!("no man page for `tunbench {}`: {e}", sub.join(" ")));
            assert!(page.contains(&format!(".TH {name} 1")), "{name}:\n{page}");
            // The synopsis names the command as it is typed.
            assert!(
                page.contains(&format!("\\fBtunbench {}\\fR", sub.join(" "))),
                "{name}:\n{page}"
            );
        }
        assert!(
            Cli::command()
                .find_subcommand("datapath")
                .unwrap()
                .is_hide_set()
        );
        assert!(!out.join("tunbench-datapath.1").exists());
        assert!(!out.join("tunbench-help.1").exists());
    }

    #[test]
    fn manpages_into_a_file_names_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let e = write_manpages(&file).unwrap_err();
        let message = format!("{e:#}");
        assert!(message.contains(&file.display().to_string()), "{message}");
    }

    #[test]
    fn bash_zsh_and_fish_complete_every_visible_subcommand() {
        let names: Vec<String> = visible_subcommands()
            .into_iter()
            .filter(|p| p.len() == 1)
            .map(|p| p[0].clone())
            .collect();
        assert!(names.contains(&"completions".to_string()));
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = String::from_utf8(completion_script(shell)).unwrap();
            for name in &names {
                assert!(
                    has_word(&script, name),
                    "the {shell} completion does not offer `{name}`"
                );
            }
            for hidden in Cli::command().get_subcommands().filter(|s| s.is_hide_set()) {
                let name = hidden.get_name();
                assert!(
                    !has_word(&script, name),
                    "the {shell} completion offers the hidden `{name}`"
                );
            }
        }
    }

    #[test]
    fn the_completed_command_has_the_version_and_every_visible_subcommand() {
        let mut completed = completed_command();
        let mut cli = Cli::command();
        completed.build();
        cli.build();
        assert_eq!(completed.get_version(), cli.get_version());
        let visible = |c: &clap::Command| -> Vec<String> {
            c.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name().to_string())
                .collect()
        };
        assert_eq!(visible(&completed), visible(&cli));
        let flags = |c: &clap::Command| -> Vec<String> {
            c.get_arguments().map(|a| a.get_id().to_string()).collect()
        };
        assert_eq!(flags(&completed), flags(&cli));
        assert!(flags(&cli).contains(&"version".to_string()));
    }

    /// Whether `name` occurs in `script` as a whole word (not inside
    /// another, as `up` inside `pubkey`).
    fn has_word(script: &str, name: &str) -> bool {
        let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        script.match_indices(name).any(|(i, _)| {
            let before = script[..i].chars().next_back();
            let after = script[i + name.len()..].chars().next();
            !before.is_some_and(is_word) && !after.is_some_and(is_word)
        })
    }
}
