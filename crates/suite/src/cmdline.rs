//! The command line as the user typed it, for the report: the real arguments, quoted for a POSIX shell where needed.

/// `bfq` followed by this process's arguments (without the program path), each quoted as [`quote`] does.
pub fn from_env() -> String {
    join(std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()))
}

/// `bfq` followed by `args`, each quoted as [`quote`] does, separated by single spaces.
pub fn join(args: impl IntoIterator<Item = String>) -> String {
    let mut line = String::from("bfq");
    for a in args {
        line.push(' ');
        line.push_str(&quote(&a));
    }
    line
}

/// `arg` as a POSIX shell word: unchanged if it has only characters no shell treats specially (letters, digits and
/// `-_./:=,+%@`), else in single quotes, with each `'` written as `'\''`.
pub fn quote(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+%@".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_a_shell_would_split_or_expand() {
        let args = [
            "suite",
            "startup",
            "--app-cmd",
            "xterm /bin/true",
            "--tune",
            "slice_idle=0",
            "",
            "it's",
            "$HOME",
        ];
        assert_eq!(
            join(args.iter().map(|s| s.to_string())),
            r"bfq suite startup --app-cmd 'xterm /bin/true' --tune slice_idle=0 '' 'it'\''s' '$HOME'"
        );
        assert_eq!(quote("sim:seagate-hdd,plextor-ssd"), "sim:seagate-hdd,plextor-ssd");
    }
}
