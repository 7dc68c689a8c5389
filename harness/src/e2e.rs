//! `cargo xtask e2e`: the real MAGMA programs, from the package registries,
//! against this project's agents.
//!
//! The command sets up by itself what the programs need on a CPU machine
//! with only the registries reachable, runs the named scenarios of
//! [`SCENARIOS`] and checks each from what the programs wrote:
//!
//! - the full Python stack in a venv ([`full_venv`],
//!   `harness/python/requirements-e2e.txt`), reused while its stamp matches;
//! - Mesa 25's lavapipe (a CPU Vulkan that SAPIEN accepts) from Debian's
//!   bookworm-backports, downloaded with a private apt state and extracted
//!   under `target/e2e/apt` ([`lavapipe`]): nothing is installed system-wide;
//! - the stand-ins of `harness/python/e2e/`: the motion planner
//!   (`planner.py`), the compiled one-scenario benchmark
//!   (`make_benchmark.py`), a scripted OpenAI-compatible provider
//!   (`scripted_provider.py`), and a logging proxy in front of every agent
//!   (`wire_proxy.py`);
//! - the release binaries `magma-server` (demo agent) and `llm-agent`.
//!
//! Everything is written under `target/e2e/`: `runs/` (BENCH results, GEN
//! outputs), `logs/` (each program's standard output and error, each
//! service's log, `wire-<scenario>.jsonl` with every exchange with the
//! agent, `provider-*.jsonl` with every exchange with the scripted
//! provider). The command exits non-zero naming every scenario that failed;
//! the programs' own error text stays in the logs it names.

use std::fmt;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use magma_protocol::routes::Endpoint;
use serde_json::Value;

use crate::process::{Guard, cargo, fmt_duration, free_port, run_inherited, target_dir};
use crate::python;

mod checks;

use checks::{
    check_reinjections, coached_branch_advances, compare_results, count_requests, episode_outcome,
    gen_exit_line, graph_files, graph_nodes, read_progress,
};

/// The scenarios, in the order they run: `(name, what it shows)`.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "bench-llm-1",
        "BENCH, llm-agent + scripted provider, one button: success",
    ),
    (
        "bench-llm-2",
        "BENCH, llm-agent + scripted provider, two buttons: success",
    ),
    (
        "bench-demo-vs-reference",
        "BENCH, demo agent and the Python reference agent: result files identical except the \
         agent card",
    ),
    (
        "gen-demo",
        "GEN without coaching, demo agent: runs and writes its graph",
    ),
    (
        "gen-demo-coaching",
        "GEN with coaching, demo agent: every re-injected proposal answered completed with the \
         proposed decision",
    ),
    (
        "gen-llm-coaching",
        "GEN with coaching, llm-agent whose first press is wrong: a coached branch executes its \
         corrected call and the task advances past the failed stage",
    ),
    (
        "gen-export",
        "magma-gen export of the llm-agent GEN run through the project's exporter",
    ),
];

/// Options of `cargo xtask e2e`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Options {
    /// Run only these scenarios (repeatable; names as listed by `--list`).
    #[arg(long, value_name = "SCENARIO")]
    pub only: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// Break the run on purpose, to see how a failure reads: `agent-killed`
    /// kills llm-agent in the middle of its BENCH episodes, `provider-down`
    /// stops the scripted provider before them.
    #[arg(long = "break", value_name = "HOW")]
    pub breakage: Option<Breakage>,
}

/// A failure made on purpose (`--break`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Breakage {
    /// llm-agent is killed once BENCH has sent it its first inference.
    AgentKilled,
    /// The scripted provider behind llm-agent is stopped before BENCH runs.
    ProviderDown,
}

/// The button sequence of the GEN runs (`ButtonPressOrdered`).
const GEN_BUTTONS: &str = "sw1,sw3";
const GEN_INSTRUCTION: &str = "Please press sw1 then sw3";
/// What the scripted provider presses first in `gen-llm-coaching`: a button
/// the scene does not have, so the first tool call fails.
const WRONG_BUTTON: &str = "sw9";
/// The model name the scripted provider answers as.
const MODEL: &str = "scripted-press-button";
/// The project's exporter package for GEN (issue 33), relative to the
/// repository, and the name it registers in `magma.export.gen`.
const EXPORTER_PACKAGE: &str = "python/magma-rs-export";
const EXPORTER: &str = "magma-rs";
/// GEN's stall watchdog in these runs, in seconds.
const GEN_STALL_TIMEOUT_SECS: &str = "90";
/// Longest run of one program.
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(600);

/// The venv with the full MAGMA stack (`harness/python/requirements-e2e.txt`:
/// `magma-core[simulation]`, magma-bench, magma-gen, magma-scenarios, SAPIEN,
/// mani-skill, torch, at exact top-level versions), created under
/// `target/xtask/venv-e2e` from the registries on first use (2-4 minutes,
/// 6.5 GB) and reused while the requirements file and the interpreter stay
/// the same. Returns the venv's Python.
pub fn full_venv() -> Result<PathBuf> {
    let root = crate::project_root()?;
    python::ensure_venv(
        "e2e",
        &root.join("harness/python/requirements-e2e.txt"),
        &[],
    )
}

/// Where `cargo xtask e2e` writes: `<target>/e2e`.
pub fn e2e_dir() -> Result<PathBuf> {
    Ok(target_dir(&crate::project_root()?).join("e2e"))
}

/// The CPU Vulkan SAPIEN needs: the ICD file and the library folder to put
/// in `VK_ICD_FILENAMES` and `LD_LIBRARY_PATH`.
#[derive(Debug, Clone)]
pub struct Vulkan {
    /// The ICD JSON naming the lavapipe library.
    pub icd: PathBuf,
    /// The folder of the extracted libraries.
    pub libs: PathBuf,
}

impl Vulkan {
    /// Points `cmd` at this Vulkan.
    pub fn apply(&self, cmd: &mut Command) {
        let mut paths = vec![self.libs.clone()];
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
            paths.extend(std::env::split_paths(&old));
        }
        cmd.env("VK_ICD_FILENAMES", &self.icd);
        if let Ok(joined) = std::env::join_paths(paths) {
            cmd.env("LD_LIBRARY_PATH", joined);
        }
    }
}

/// Mesa 25's lavapipe from Debian bookworm-backports, extracted under
/// `<e2e>/apt/root` (once; reused after). Debian bookworm's own Mesa 22.3
/// lavapipe is refused by SAPIEN 3 ("Failed to find a supported physical
/// device"). Uses the machine's apt-get and dpkg-deb with a private state:
/// nothing is installed system-wide and no privilege is needed.
pub fn lavapipe(e2e: &Path) -> Result<Vulkan> {
    let apt = e2e.join("apt");
    let root = apt.join("root");
    let libs = root.join("usr/lib/x86_64-linux-gnu");
    let library = libs.join("libvulkan_lvp.so");
    let icd = apt.join("lvp_icd.json");
    if icd.is_file() && library.is_file() {
        return Ok(Vulkan { icd, libs });
    }
    eprintln!("xtask e2e: fetching Mesa 25 lavapipe from bookworm-backports");
    for dir in ["lists/partial", "cache/archives/partial", "debs", "root"] {
        fs::create_dir_all(apt.join(dir))
            .with_context(|| format!("creating {}", apt.join(dir).display()))?;
    }
    let sources = apt.join("sources.list");
    fs::write(
        &sources,
        format!("deb {} bookworm-backports main\n", debian_mirror()),
    )
    .with_context(|| format!("writing {}", sources.display()))?;
    let options = [
        format!("Dir::Etc::SourceList={}", sources.display()),
        "Dir::Etc::SourceParts=/dev/null".to_owned(),
        format!("Dir::State::Lists={}", apt.join("lists").display()),
        format!("Dir::Cache={}", apt.join("cache").display()),
    ];
    let apt_get = |args: &[&str]| {
        let mut cmd = Command::new("apt-get");
        for option in &options {
            cmd.arg("-o").arg(option);
        }
        cmd.args(args).current_dir(apt.join("debs"));
        cmd
    };
    python::run(&mut apt_get(&["update"])).context("apt-get update (bookworm-backports)")?;
    python::run(&mut apt_get(&[
        "download",
        "mesa-vulkan-drivers/bookworm-backports",
        "libdrm2/bookworm-backports",
        "libdrm-amdgpu1/bookworm-backports",
    ]))
    .context("downloading Mesa 25 lavapipe")?;
    let debs = apt.join("debs");
    for entry in fs::read_dir(&debs).with_context(|| format!("reading {}", debs.display()))? {
        let deb = entry?.path();
        if deb.extension().is_some_and(|e| e == "deb") {
            python::run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))
                .with_context(|| format!("extracting {}", deb.display()))?;
        }
    }
    if !library.is_file() {
        bail!(
            "{} is missing after extracting mesa-vulkan-drivers",
            library.display()
        );
    }
    let icd_json = serde_json::json!({
        "file_format_version": "1.0.1",
        "ICD": {"library_path": library, "api_version": "1.4.305"},
    });
    fs::write(&icd, format!("{icd_json:#}\n"))
        .with_context(|| format!("writing {}", icd.display()))?;
    Ok(Vulkan { icd, libs })
}

/// The Debian mirror the machine's apt uses, else deb.debian.org.
fn debian_mirror() -> String {
    let mut files = vec![PathBuf::from("/etc/apt/sources.list")];
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut more: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        more.sort();
        files.extend(more);
    }
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or("");
            let uri = match first {
                "deb" => words.find(|w| !w.starts_with('[') && !w.ends_with(']')),
                "URIs:" => words.next(),
                _ => None,
            };
            if let Some(uri) = uri.filter(|u| u.contains("debian") && !u.contains("security")) {
                return uri.trim_end_matches('/').to_owned();
            }
        }
    }
    "http://deb.debian.org/debian".to_owned()
}

/// How a scenario ended.
#[derive(Debug)]
enum Outcome {
    Passed(String),
    Failed(String),
    Skipped(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Passed(s) => write!(f, "PASS  {s}"),
            Outcome::Failed(s) => write!(f, "FAIL  {s}"),
            Outcome::Skipped(s) => write!(f, "SKIP  {s}"),
        }
    }
}

/// The running pieces and where things go.
struct Stack {
    root: PathBuf,
    python: PathBuf,
    vulkan: Vulkan,
    runs: PathBuf,
    logs: PathBuf,
    bin: PathBuf,
    planner_url: String,
    /// Services kept alive for the whole run (dropped = stopped).
    services: Vec<Guard>,
}

/// One service: its guard and port.
struct Service {
    guard: Guard,
    port: u16,
}

impl Service {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Runs `cargo xtask e2e`.
pub fn run(options: &Options) -> Result<()> {
    if options.list {
        for (name, what) in SCENARIOS {
            println!("{name:<26} {what}");
        }
        return Ok(());
    }
    for name in &options.only {
        if !SCENARIOS.iter().any(|(n, _)| n == name) {
            bail!("--only {name}: no such scenario (see `cargo xtask e2e --list`)");
        }
    }
    let wanted = |name: &str| options.only.is_empty() || options.only.iter().any(|n| n == name);
    let started = Instant::now();
    let root = crate::project_root()?;
    let e2e = e2e_dir()?;
    let runs = e2e.join("runs");
    let logs = e2e.join("logs");
    for dir in [&runs, &logs] {
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }

    eprintln!("xtask e2e: the full Python stack (venv)");
    let python = full_venv()?;
    let vulkan = lavapipe(&e2e)?;
    eprintln!("xtask e2e: building the release magma-server and llm-agent");
    run_inherited(
        "building magma-server and llm-agent (release)",
        cargo().current_dir(&root).args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "magma-rs-server",
            "--bin",
            "magma-server",
            "-p",
            "magma-llm-agent",
            "--bin",
            "llm-agent",
        ]),
    )?;
    let bin = target_dir(&root).join("release");
    let mut stack = Stack {
        python,
        vulkan,
        runs,
        logs,
        bin,
        planner_url: String::new(),
        services: Vec::new(),
        root,
    };
    print_stand_ins();

    let planner = stack.python_service("planner", "planner.py", &[], Duration::from_secs(120))?;
    stack.planner_url = planner.url();
    stack.services.push(planner.guard);

    let mut results: Vec<(&'static str, Outcome, Duration)> = Vec::new();
    let mut record = |name: &'static str, outcome: Result<Outcome>, took: Duration| {
        let outcome = outcome.unwrap_or_else(|e| Outcome::Failed(format!("{e:#}")));
        println!("xtask e2e: {name}: {outcome} ({})", fmt_duration(took));
        results.push((name, outcome, took));
    };

    // BENCH with llm-agent behind the scripted provider.
    for (name, buttons) in [("bench-llm-1", "sw1"), ("bench-llm-2", "sw1,sw3")] {
        if wanted(name) {
            let t = Instant::now();
            let outcome = stack.bench_llm(name, buttons, options.breakage);
            record(name, outcome, t.elapsed());
        }
    }
    if wanted("bench-demo-vs-reference") {
        let t = Instant::now();
        let outcome = stack.bench_demo_vs_reference("bench-demo-vs-reference");
        record("bench-demo-vs-reference", outcome, t.elapsed());
    }
    if wanted("gen-demo") {
        let t = Instant::now();
        let outcome = stack.gen_demo("gen-demo", false);
        record("gen-demo", outcome, t.elapsed());
    }
    if wanted("gen-demo-coaching") {
        let t = Instant::now();
        let outcome = stack.gen_demo("gen-demo-coaching", true);
        record("gen-demo-coaching", outcome, t.elapsed());
    }
    let mut llm_run = None;
    if wanted("gen-llm-coaching") {
        let t = Instant::now();
        let outcome = stack.gen_llm_coaching("gen-llm-coaching");
        if matches!(outcome, Ok(Outcome::Passed(_))) {
            llm_run = Some(stack.runs.join("output").join("gen-llm-coaching"));
        }
        record("gen-llm-coaching", outcome, t.elapsed());
    }
    if wanted("gen-export") {
        let t = Instant::now();
        let outcome = stack.gen_export("gen-export", llm_run.as_deref());
        record("gen-export", outcome, t.elapsed());
    }
    drop(stack);

    println!(
        "\nxtask e2e: {} scenario(s) in {}; outputs under {}",
        results.len(),
        fmt_duration(started.elapsed()),
        e2e.display()
    );
    for (name, outcome, took) in &results {
        println!("  {name:<26} {outcome} ({})", fmt_duration(*took));
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, o, _)| matches!(o, Outcome::Failed(_)))
        .map(|(n, _, _)| *n)
        .collect();
    if !failed.is_empty() {
        bail!(
            "e2e scenario(s) failed: {} (the programs' output is under {})",
            failed.join(", "),
            e2e.join("logs").display()
        );
    }
    Ok(())
}

/// Says plainly what the run stands in for.
fn print_stand_ins() {
    println!(
        "xtask e2e: stand-ins (see docs/e2e.md):\n\
         \x20 - compiled benchmark: one press_button scenario written with magma-bench's and \
         magma-scenarios' own classes (the public one is fetched from a model hub);\n\
         \x20 - motion planner: planner.py, the planner server's contract and algorithm on \
         mplib and mani-skill's Panda description (the server is on no registry);\n\
         \x20 - language model: scripted_provider.py, a scripted OpenAI-compatible server \
         (llm-agent's model and GEN's LLM backend);\n\
         \x20 - GPU: Mesa 25 lavapipe (CPU Vulkan) and CPU physics, one environment."
    );
}

impl Stack {
    /// The venv's Python with the Vulkan stand-in, working in `runs/`.
    fn python_cmd(&self) -> Command {
        let mut cmd = python::command(&self.python);
        self.vulkan.apply(&mut cmd);
        cmd.current_dir(&self.runs);
        cmd
    }

    fn script(&self, name: &str) -> PathBuf {
        self.root.join("harness/python/e2e").join(name)
    }

    /// Starts a service whose output goes to `logs/<log>.out` and waits
    /// until it listens.
    fn service(
        &self,
        name: &'static str,
        log: &str,
        mut cmd: Command,
        port: u16,
        within: Duration,
    ) -> Result<Service> {
        let out = log_file(&self.logs, &format!("{log}.out"))?;
        let err = out.try_clone().context("duplicating a log file handle")?;
        cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err));
        let mut guard = Guard::spawn(name, &mut cmd)?;
        crate::process::wait_for_port(&mut guard, port, within).with_context(|| {
            format!(
                "{name} did not start; see {}",
                self.logs.join(format!("{log}.out")).display()
            )
        })?;
        Ok(Service { guard, port })
    }

    fn python_service(
        &self,
        name: &'static str,
        script: &str,
        args: &[&str],
        within: Duration,
    ) -> Result<Service> {
        let port = free_port()?;
        let mut cmd = self.python_cmd();
        cmd.arg(self.script(script))
            .arg(port.to_string())
            .args(args);
        self.service(name, name, cmd, port, within)
    }

    /// The scripted provider, logging to `logs/provider-<tag>.jsonl`.
    fn provider(&self, tag: &str, first_wrong: Option<&str>) -> Result<Service> {
        let port = free_port()?;
        let mut cmd = self.python_cmd();
        cmd.arg(self.script("scripted_provider.py"))
            .arg(port.to_string())
            .arg(self.logs.join(format!("provider-{tag}.jsonl")))
            .args(["--model", MODEL]);
        if let Some(button) = first_wrong {
            cmd.args(["--first-wrong", button]);
        }
        self.service(
            "scripted provider",
            &format!("provider-{tag}"),
            cmd,
            port,
            Duration::from_secs(30),
        )
    }

    fn demo_agent(&self, log: &str) -> Result<Service> {
        let port = free_port()?;
        let mut cmd = Command::new(self.bin.join("magma-server"));
        cmd.args(["--listen", &format!("127.0.0.1:{port}")]);
        self.service("magma-server", log, cmd, port, Duration::from_secs(30))
    }

    fn llm_agent(&self, log: &str, provider: &Service) -> Result<Service> {
        let port = free_port()?;
        let mut cmd = Command::new(self.bin.join("llm-agent"));
        cmd.args(["--base-url", &format!("{}/v1", provider.url())])
            .args(["--model", MODEL, "--temperature", "0"])
            .args(["--listen", &format!("127.0.0.1:{port}")]);
        self.service("llm-agent", log, cmd, port, Duration::from_secs(30))
    }

    /// A logging proxy to `upstream`, writing `logs/wire-<scenario>.jsonl`.
    fn proxy(&self, scenario: &str, upstream: &Service) -> Result<(Service, PathBuf)> {
        let port = free_port()?;
        let wire = self.logs.join(format!("wire-{scenario}.jsonl"));
        let mut cmd = self.python_cmd();
        cmd.arg(self.script("wire_proxy.py"))
            .arg(port.to_string())
            .arg(upstream.url())
            .arg(&wire);
        let service = self.service(
            "wire proxy",
            &format!("proxy-{scenario}"),
            cmd,
            port,
            Duration::from_secs(30),
        )?;
        Ok((service, wire))
    }

    /// Runs a program to its end (at most [`PROGRAM_TIMEOUT`]), its output
    /// in `logs/<name>.out` and `.err`; `during` is called about every
    /// 200 ms while it runs.
    fn program(
        &self,
        name: &str,
        mut cmd: Command,
        mut during: impl FnMut(),
    ) -> Result<ExitStatus> {
        let out = log_file(&self.logs, &format!("{name}.out"))?;
        let err = log_file(&self.logs, &format!("{name}.err"))?;
        cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err));
        let mut child = cmd
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {cmd:?}"))?;
        let deadline = Instant::now() + PROGRAM_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "{name} still ran after {}; stopped (see {})",
                    fmt_duration(PROGRAM_TIMEOUT),
                    self.log_path(name, "err")
                );
            }
            during();
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log_path(&self, name: &str, ext: &str) -> String {
        self.logs
            .join(format!("{name}.{ext}"))
            .display()
            .to_string()
    }

    /// The compiled benchmark for `buttons`, made once per run.
    fn benchmark(&self, buttons: &str) -> Result<PathBuf> {
        let dir = self
            .runs
            .join(format!("benchmark-{}", buttons.replace(',', "_")));
        if dir.join("benchmark.json").is_file() {
            return Ok(dir);
        }
        let mut cmd = self.python_cmd();
        cmd.arg(self.script("make_benchmark.py"))
            .arg(&dir)
            .arg(buttons);
        let output = python::run(&mut cmd).context("writing the compiled test benchmark")?;
        eprint!("xtask e2e: {}", String::from_utf8_lossy(&output.stdout));
        Ok(dir)
    }

    /// `magma-bench run` of the benchmark for `buttons` against `agent`;
    /// returns the results folder and the exit status.
    fn bench(
        &self,
        name: &str,
        buttons: &str,
        agent: &str,
        during: impl FnMut(),
    ) -> Result<(PathBuf, ExitStatus)> {
        let benchmark = self.benchmark(buttons)?;
        let results = self.runs.join(name);
        let mut cmd = self.python_cmd();
        cmd.args(["-m", "magma_bench", "run", "--benchmark-root"])
            .arg(&benchmark)
            .args(["--agent-address", agent])
            .args(["--planner-address", &self.planner_url])
            .arg("--results-path")
            .arg(&results)
            .args(["--sim-backend", "cpu", "--nb-env", "1", "--skip-judge"])
            .args(["--videos", "off", "--model-logs", "--agent-timeout", "120"]);
        eprintln!("xtask e2e: {name}: magma-bench run against {agent}");
        let status = self.program(name, cmd, during)?;
        Ok((results, status))
    }

    fn bench_llm(
        &self,
        name: &'static str,
        buttons: &str,
        breakage: Option<Breakage>,
    ) -> Result<Outcome> {
        let provider = self.provider(name, None)?;
        let agent = self.llm_agent(&format!("llm-agent-{name}"), &provider)?;
        let (proxy, wire) = self.proxy(name, &agent)?;
        let mut provider = Some(provider);
        if breakage == Some(Breakage::ProviderDown) {
            // Once llm-agent is ready: it waits for its provider to start.
            magma_client::Client::new(agent.url())?
                .wait_ready(Duration::from_secs(60))
                .context("llm-agent did not become ready")?;
            eprintln!("xtask e2e: {name}: --break provider-down: stopping the scripted provider");
            provider = None;
        }
        let mut agent = Some(agent);
        let kill = breakage == Some(Breakage::AgentKilled);
        let (results, status) = self.bench(name, buttons, &proxy.url(), || {
            if kill && agent.is_some() && count_requests(&wire, Endpoint::Responses.path()) > 0 {
                eprintln!("xtask e2e: {name}: --break agent-killed: killing llm-agent mid-episode");
                agent = None;
            }
        })?;
        drop((provider, proxy));
        let progress = read_progress(&results);
        let completed = progress
            .lines()
            .filter(|l| l.contains("EPISODE_COMPLETED"))
            .collect::<Vec<_>>()
            .join("\n");
        if !status.success() {
            return Ok(Outcome::Failed(format!(
                "magma-bench exited with {status}; its error: {}; progress: {} (see {})",
                program_error(&self.log_path(name, "err"), 3),
                if completed.is_empty() {
                    "(no episode completed)".to_owned()
                } else {
                    episode_outcome(&completed)
                },
                self.log_path(name, "err")
            )));
        }
        if completed.contains("status=success") {
            Ok(Outcome::Passed(format!(
                "episode {} (results in {})",
                episode_outcome(&completed),
                results.display()
            )))
        } else {
            Ok(Outcome::Failed(format!(
                "the episode did not succeed: {} (see {}/progress.log and {})",
                if completed.is_empty() {
                    "no EPISODE_COMPLETED line".to_owned()
                } else {
                    episode_outcome(&completed)
                },
                results.display(),
                wire.display()
            )))
        }
    }

    fn bench_demo_vs_reference(&self, name: &'static str) -> Result<Outcome> {
        let demo = self.demo_agent(&format!("magma-server-{name}"))?;
        let (demo_proxy, _) = self.proxy(&format!("{name}-demo"), &demo)?;
        let (demo_results, demo_status) =
            self.bench(&format!("{name}-demo"), "sw1,sw3", &demo_proxy.url(), || {})?;
        drop((demo_proxy, demo));

        let port = free_port()?;
        let mut cmd = self.python_cmd();
        cmd.arg(self.root.join("harness/python/fastapi_agent.py"))
            .args(["--port", &port.to_string(), "--no-internal-steps"]);
        let reference = self.service(
            "fastapi_agent.py",
            &format!("reference-agent-{name}"),
            cmd,
            port,
            Duration::from_secs(60),
        )?;
        let (ref_proxy, _) = self.proxy(&format!("{name}-reference"), &reference)?;
        let (ref_results, ref_status) = self.bench(
            &format!("{name}-reference"),
            "sw1,sw3",
            &ref_proxy.url(),
            || {},
        )?;
        drop((ref_proxy, reference));

        for (who, status) in [("demo", demo_status), ("reference", ref_status)] {
            if !status.success() {
                return Ok(Outcome::Failed(format!(
                    "magma-bench against the {who} agent exited with {status}: {}",
                    program_error(&self.log_path(&format!("{name}-{who}"), "err"), 3)
                )));
            }
        }
        let differences = compare_results(&demo_results, &ref_results)?;
        let progress = read_progress(&demo_results);
        let status_line = progress
            .lines()
            .find(|l| l.contains("EPISODE_COMPLETED"))
            .map_or_else(|| "(no EPISODE_COMPLETED line)".to_owned(), episode_outcome);
        if differences.is_empty() {
            Ok(Outcome::Passed(format!(
                "result files identical except the agent card; demo episode: {status_line}"
            )))
        } else {
            Ok(Outcome::Failed(format!(
                "the result files differ beyond the agent card: {}",
                differences.join("; ")
            )))
        }
    }

    /// GEN's configuration: one LLM backend (the scripted provider at
    /// `provider`), the planner.
    fn gen_config(&self, name: &str, provider: &Service) -> Result<PathBuf> {
        let path = self.runs.join(format!("gen-config-{name}.yaml"));
        let text = format!(
            "# GEN's configuration for the e2e scenario {name}, merged over magma-core's \
             defaults.\n\
             backends:\n  scripted:\n    type: ollama\n    endpoint: \"{}/v1/chat/completions\"\n    \
             default_model: \"{MODEL}\"\n    headers:\n      Content-type: \"application/json\"\n    \
             timeout: 30\n    max_retry: 1\n\
             magma_planner_address: \"{}\"\n",
            provider.url(),
            self.planner_url
        );
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }

    /// `magma-gen run` against `agent`; returns GEN's output folder and the
    /// exit status.
    fn gen_run(
        &self,
        name: &str,
        agent: &str,
        provider: &Service,
        coaching: bool,
        branches: u32,
    ) -> Result<(PathBuf, ExitStatus)> {
        let config = self.gen_config(name, provider)?;
        let mut cmd = self.python_cmd();
        cmd.args(["-m", "magma_gen", "run", name, "--config-path"])
            .arg(&config)
            .args(["--magma-agent-address", agent])
            .args(["--preset", "press_button.ButtonPressOrdered"])
            .args(["--nb-branch", &branches.to_string(), "--nb-env", "1"])
            .args(["--nb-max-update", "2", "--max-launch-per-stage", "1"])
            .args(["--seed", "0"]);
        if !coaching {
            cmd.arg("--no-coaching");
        }
        // GEN's stall watchdog (600 s by default) ends a run that stopped
        // making progress, and GEN then saves its graph: two coached
        // branches that reach the next stage at once stall GEN's single
        // CPU simulation (docs/e2e.md).
        cmd.env("MAGMA_GEN_STALL_TIMEOUT_SECONDS", GEN_STALL_TIMEOUT_SECS);
        cmd.args(["--sequence_of_buttons", GEN_BUTTONS])
            .args(["--instruction", GEN_INSTRUCTION]);
        eprintln!(
            "xtask e2e: {name}: magma-gen run against {agent} ({}coaching, {branches} branch(es))",
            if coaching { "" } else { "no " }
        );
        let status = self.program(name, cmd, || {})?;
        Ok((self.runs.join("output").join(name), status))
    }

    fn gen_failed(&self, name: &str, status: ExitStatus) -> Outcome {
        Outcome::Failed(format!(
            "magma-gen exited with {status}: {} (see {})",
            program_error(&self.log_path(name, "err"), 3),
            self.log_path(name, "err")
        ))
    }

    fn gen_demo(&self, name: &'static str, coaching: bool) -> Result<Outcome> {
        let provider = self.provider(name, None)?;
        let demo = self.demo_agent(&format!("magma-server-{name}"))?;
        let (proxy, wire) = self.proxy(name, &demo)?;
        let (output, status) = self.gen_run(name, &proxy.url(), &provider, coaching, 2)?;
        drop((proxy, demo, provider));
        if !status.success() {
            return Ok(self.gen_failed(name, status));
        }
        let graphs = graph_files(&output);
        if graphs.is_empty() {
            return Ok(Outcome::Failed(format!(
                "GEN wrote no graph under {} (see {})",
                output.display(),
                self.log_path(name, "out")
            )));
        }
        let exit = gen_exit_line(&self.log_path(name, "out"));
        if !coaching {
            let situations = graph_nodes(&graphs)?;
            let candidates: usize = situations
                .iter()
                .map(|s| s["candidates"].as_array().map_or(0, Vec::len))
                .sum();
            return Ok(Outcome::Passed(format!(
                "graph written under {} ({} situations, {candidates} candidates); {exit}",
                output.display(),
                situations.len()
            )));
        }
        let check = check_reinjections(&wire)?;
        match check.problems.is_empty() && check.reinjected > 0 {
            true => Ok(Outcome::Passed(format!(
                "{} coaching request(s), {} re-injected candidate(s), every one completed with \
                 the proposed decision; {exit}",
                check.coaching_requests, check.reinjected
            ))),
            false if check.reinjected == 0 => Ok(Outcome::Failed(format!(
                "GEN re-injected nothing ({} coaching request(s), answers: {}); see {}",
                check.coaching_requests,
                check.statuses.join(", "),
                wire.display()
            ))),
            false => Ok(Outcome::Failed(format!(
                "{} of {} re-injected candidate(s) not completed with the proposed decision, \
                 first: {}; see {}",
                check.problems.len(),
                check.reinjected,
                check.problems[0],
                wire.display()
            ))),
        }
    }

    fn gen_llm_coaching(&self, name: &'static str) -> Result<Outcome> {
        let provider = self.provider(name, Some(WRONG_BUTTON))?;
        let agent = self.llm_agent(&format!("llm-agent-{name}"), &provider)?;
        let (proxy, wire) = self.proxy(name, &agent)?;
        let (output, status) = self.gen_run(name, &proxy.url(), &provider, true, 1)?;
        drop((proxy, agent, provider));
        if !status.success() {
            return Ok(self.gen_failed(name, status));
        }
        let check = check_reinjections(&wire)?;
        let exit = gen_exit_line(&self.log_path(name, "out"));
        if check.reinjected == 0 {
            return Ok(Outcome::Failed(format!(
                "GEN re-injected nothing ({} coaching request(s), answers: {}); {exit}; see {}",
                check.coaching_requests,
                check.statuses.join(", "),
                wire.display()
            )));
        }
        if !check.problems.is_empty() {
            return Ok(Outcome::Failed(format!(
                "re-injected candidate not completed with the proposed decision: {}; see {}",
                check.problems[0],
                wire.display()
            )));
        }
        let graphs = graph_files(&output);
        let advance = coached_branch_advances(&graph_nodes(&graphs)?);
        match advance {
            Ok(how) => Ok(Outcome::Passed(format!(
                "{} coaching request(s), {} re-injected candidate(s) completed; {how}; {exit}",
                check.coaching_requests, check.reinjected
            ))),
            Err(why) => Ok(Outcome::Failed(format!(
                "{why} (graph under {}; {exit})",
                output.display()
            ))),
        }
    }

    /// The hook of issue 33: GEN's `export` of the llm-agent run through
    /// the project's exporter package (`python/magma-rs-export`, entry
    /// point `magma-rs` of group `magma.export.gen`), skipped while the
    /// repository has no such package.
    fn gen_export(&self, name: &'static str, run: Option<&Path>) -> Result<Outcome> {
        let package = self.root.join(EXPORTER_PACKAGE);
        if !package.join("pyproject.toml").is_file() {
            return Ok(Outcome::Skipped(format!(
                "the project's exporter ({EXPORTER_PACKAGE}, issue 33) is not in this repository \
                 yet: GEN's `export --agent {EXPORTER}` would answer \"Unknown exporter\""
            )));
        }
        let Some(run) = run else {
            return Ok(Outcome::Failed(
                "gen-llm-coaching did not pass: no GEN run of llm-agent to export".to_owned(),
            ));
        };
        let mut install = python::command(&self.python);
        install
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--force-reinstall",
            ])
            .arg(&package)
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
        python::run(&mut install).context("installing the project's exporter into the venv")?;
        let mut cmd = self.python_cmd();
        cmd.args(["-m", "magma_gen", "export"])
            .arg(run)
            .args(["--agent", EXPORTER])
            .env("MAGMA_RS_EXPORT_BINARY", self.bin.join("llm-agent"));
        eprintln!(
            "xtask e2e: {name}: magma-gen export {} --agent {EXPORTER}",
            run.display()
        );
        let status = self.program(name, cmd, || {})?;
        if !status.success() {
            return Ok(Outcome::Failed(format!(
                "magma-gen export exited with {status}: {} (see {})",
                program_error(&self.log_path(name, "err"), 3),
                self.log_path(name, "err")
            )));
        }
        let manifest = run.join("datasets").join("export_manifest.json");
        let text = fs::read_to_string(&manifest).unwrap_or_default();
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if value["complete"] == Value::Bool(true) {
            Ok(Outcome::Passed(format!(
                "datasets and {} written through the exporter {EXPORTER}",
                manifest.display()
            )))
        } else {
            Ok(Outcome::Failed(format!(
                "magma-gen export exited 0 but {} is missing or not complete",
                manifest.display()
            )))
        }
    }
}

fn log_file(logs: &Path, name: &str) -> Result<File> {
    let path = logs.join(name);
    File::create(&path).with_context(|| format!("creating {}", path.display()))
}

/// The exception lines of a Python program's standard error
/// (`requests.exceptions.HTTPError: 502 ...`, `RuntimeError: ...`), at most
/// `n`, joined with ` | `; else its last `n` lines.
fn program_error(path: &str, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let exceptions: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with(' '))
        .filter(|l| {
            l.split_once(": ").is_some_and(|(head, _)| {
                !head.contains(' ')
                    && (head.ends_with("Error") || head.ends_with("Exception"))
                    && !head.ends_with("Warning")
            })
        })
        .collect();
    if exceptions.is_empty() {
        return last_lines(path, n);
    }
    let start = exceptions.len().saturating_sub(n);
    exceptions[start..].join(" | ")
}

/// The last `n` non-empty lines of a file that are not warnings (SAPIEN
/// and mani-skill warn about the missing GPU in every run), joined with
/// ` | `.
fn last_lines(path: &str, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| {
            !l.contains("Warning") && !l.contains("WARNING") && !l.trim_start().starts_with("warn(")
        })
        .collect();
    let start = lines.len().saturating_sub(n);
    match lines[start..].join(" | ") {
        s if s.is_empty() => format!("(nothing in {path})"),
        s => s,
    }
}
