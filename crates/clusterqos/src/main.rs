//! `clusterqos` — the one command users run. Thin: parses arguments, calls the crates,
//! renders tables and JSON. Each subcommand lives in `commands/<name>.rs`.
//!
//! Exit status: 0 on success, 2 on any error (bad input, failed I/O), printed as one
//! line `error: ...` on stderr (with `file:line` when a file is at fault). Commands that
//! check results against published values (`reproduce`, `run`, `sweep`) exit 0 when they
//! ran — a miss is a result, shown in the table — and 1 on a miss with `--check`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod commands;
mod output;
mod progress;

// mimalloc: the manager and agent services allocate many small short-lived buffers per
// request (HTTP, JSON); the system allocator was a large share of their CPU time. The
// simulator-only build keeps the system allocator (one C library less to compile).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "runtime")]
/// mimalloc keeps the pages a burst of closed connections freed until it next
/// allocates on them; the manager asks it to return them once the burst is over.
fn collect_freed_memory() {
    // SAFETY: mi_collect only walks mimalloc's own heaps and arenas.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

/// Proportional bandwidth allocation for cluster interconnects: NIC rate control
/// (IDT/NDT) under a bandwidth resource manager, simulated and on real hosts.
#[derive(Debug, Parser)]
#[command(name = "clusterqos", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the rate-control dispatch table for a set of flows (thesis Table 3.1).
    Schedule(commands::schedule::Args),
    /// Replay a topology and a sequence of requests/releases through admission control.
    Admit(commands::admit::Args),
    #[cfg(feature = "runtime")]
    /// Run the master bandwidth resource manager (admission, IDTs, best-effort shares).
    Manager(commands::manager::Args),
    #[cfg(feature = "runtime")]
    /// Run a node's agent: registers with the manager, serves local applications.
    Agent(commands::agent::Args),
    #[cfg(feature = "runtime")]
    /// Ask the local agent for a premium reservation or a best-effort flow.
    Request(commands::request::Args),
    #[cfg(feature = "runtime")]
    /// Give back a flow this user owns.
    Release(commands::release::Args),
    #[cfg(feature = "runtime")]
    /// Run an unmodified program under a flow: request it, run, release on exit.
    Exec(commands::exec::Args),
    #[cfg(feature = "runtime")]
    /// Reserve, release, renew or list job reservations: every flow of a parallel job
    /// at once or none (`job reserve --nodes h0,h1,h2 --rate 10MB/s`).
    Job(commands::job::Args),
    #[cfg(feature = "runtime")]
    /// Show capacity, reserved, best-effort and free bandwidth per node and switch port.
    Status(commands::status::Args),
    /// Performance benchmarks (`bench network`: flit-level simulation speed).
    Bench(commands::bench::Args),
    /// Run a scenario file (or a shipped scenario by name) and compare with published values.
    Run(commands::run::Args),
    /// Run a scenario at every combination of some of its values and seeds, in parallel
    /// (`--over KEY=V1,V2 --seeds 1..10 --workers N`); with --check, exit 1 when a check misses.
    Sweep(commands::sweep::Args),
    /// Write the BookSim2-equivalent flit scenario of a BookSim2 configuration file
    /// (`from-booksim mesh.cfg injection_rate=0.01`); `run FILE.cfg` runs it directly.
    FromBooksim(commands::from_booksim::Args),
    /// Reproduce a paper's experiments (`reproduce gulati`, `reproduce nagar`, `reproduce yum`): table, report; with --check, exit 1 on a miss.
    Reproduce(commands::reproduce::Args),
    #[cfg(feature = "runtime")]
    /// Build or remove a cluster of network namespaces with shaped links (real traffic).
    Testbed(commands::testbed::Args),
    #[cfg(feature = "runtime")]
    /// Measure T and Bmax (thesis §5.3 IDT sweep) and write them into the topology.
    Calibrate(commands::calibrate::Args),
    // New subcommands are added here, one line each, with their module in commands/.
}

fn main() -> ExitCode {
    restore_default_sigpipe();
    #[cfg(feature = "runtime")]
    qos_runtime::manager::hub::set_release_hook(collect_freed_memory);
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Schedule(a) => commands::schedule::run(a),
        Command::FromBooksim(a) => commands::from_booksim::run(a),
        Command::Run(a) => commands::run::run(a),
        Command::Reproduce(a) => commands::reproduce::run(a),
        Command::Sweep(a) => commands::sweep::run(a),
        Command::Admit(a) => commands::admit::run(a),
        Command::Bench(a) => commands::bench::run(a),
        #[cfg(feature = "runtime")]
        Command::Manager(a) => commands::manager::run(a),
        #[cfg(feature = "runtime")]
        Command::Agent(a) => commands::agent::run(a),
        #[cfg(feature = "runtime")]
        Command::Request(a) => commands::request::run(a),
        #[cfg(feature = "runtime")]
        Command::Release(a) => commands::release::run(a),
        #[cfg(feature = "runtime")]
        Command::Exec(a) => commands::exec::run(a),
        #[cfg(feature = "runtime")]
        Command::Status(a) => commands::status::run(a),
        #[cfg(feature = "runtime")]
        Command::Job(a) => commands::job::run(a),
        #[cfg(feature = "runtime")]
        Command::Testbed(a) => commands::testbed::run(a),
        #[cfg(feature = "runtime")]
        Command::Calibrate(a) => commands::calibrate::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", output::error_line(&e));
            ExitCode::from(2)
        }
    }
}

/// Lets `clusterqos ... | head` end quietly like any Unix filter: Rust ignores SIGPIPE,
/// which would turn a closed pipe into a panic inside `println!`.
fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every command's and subcommand's long help, with its path ("bench network").
    fn helps(cmd: &mut clap::Command, path: &str, out: &mut Vec<(String, String)>) {
        out.push((path.to_string(), cmd.render_long_help().to_string()));
        for sub in cmd.get_subcommands_mut() {
            let p = format!("{path} {}", sub.get_name());
            helps(sub, &p, out);
        }
    }

    #[test]
    fn no_help_text_shows_rustdoc_link_syntax() {
        let mut cmd = Cli::command();
        cmd.build();
        let mut all = Vec::new();
        helps(&mut cmd, "clusterqos", &mut all);
        assert!(all.len() > 20, "{} commands", all.len());
        for (path, help) in all {
            for bad in ["[`", "`]", "]("] {
                assert!(
                    !help.contains(bad),
                    "`{path} --help` shows {bad:?}:\n{help}"
                );
            }
        }
    }
}
