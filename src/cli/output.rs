//! Standard output of the commands. `println!` panics when the reader has gone
//! (`a2a-gateway list | head`); these write instead, and end the process quietly with
//! status 0 on a closed pipe (nothing is left to show anyone), or with status 1 and
//! one line on stderr on any other write error.

use std::io::Write as _;

/// Writes `args` to stdout and flushes it (so a partial line, such as streamed
/// text, shows at once). Exits the process on a write error, as the module says.
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("a2a-gateway: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// `print!` through [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::output::write(format_args!($($arg)*))
    };
}

/// `println!` through [`write`].
macro_rules! outln {
    () => {
        $crate::cli::output::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
