//! The one shape of every experiment (DESIGN.md, "experiments"): the thesis's, Nagar
//! et al.'s and Yum et al.'s reproductions, the flit network's load sweeps, and the
//! real-testbed variants all implement [`Experiment`] — their shipped scenarios, how a
//! scenario file is loaded and validated, how the scenarios are run (one signature:
//! scenarios, [`RunOptions`], a [`Progress`] sink), their checks and their report — so
//! that `clusterqos reproduce` and `clusterqos run` are one generic path each
//! ([`crate::reproduce`], [`crate::run`]).
//!
//! A scenario file says which model it is for in its first key, `model = "gulati" |
//! "flit" | "yum" | "nagar"` ([`Model::of`]), and is parsed once, by that experiment.

use std::path::Path;

use qos_core::source::Located;
use serde::{Deserialize, Serialize};

use crate::check::{Check, Mechanism};
use crate::report::{Report, Table};
use crate::Error;

/// Which model a scenario file is for: its `model` key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// The thesis's Myrinet/GM cluster (`scenarios/gulati/`).
    Gulati,
    /// The flit-level network's load sweeps (`scenarios/flit/`).
    Flit,
    /// Yum et al.'s QoS wormhole cluster (`scenarios/yum/`).
    Yum,
    /// Nagar et al.'s VIA firmware (`scenarios/nagar/`).
    Nagar,
}

impl Model {
    /// Every model, in the order errors list them.
    pub const ALL: [Model; 4] = [Model::Gulati, Model::Flit, Model::Yum, Model::Nagar];

    /// Its name in files.
    pub fn name(self) -> &'static str {
        match self {
            Model::Gulati => "gulati",
            Model::Flit => "flit",
            Model::Yum => "yum",
            Model::Nagar => "nagar",
        }
    }

    /// The model a scenario's `text` (named `file`) declares: a one-line `file:line`
    /// error naming the key when it is missing, unknown, or the text is not TOML.
    pub fn of(file: &str, text: &str) -> Result<Model, Located> {
        let known = || {
            Model::ALL
                .iter()
                .map(|m| format!("\"{}\"", m.name()))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let doc: toml::Spanned<toml::Table> = qos_core::source::parse_toml(file, text)?;
        let start = doc.span().start;
        match doc.get_ref().get("model") {
            None => Err(Located::at(
                file,
                text,
                start,
                format!(
                    "missing key `model`: say which model the scenario is for (model = {})",
                    known()
                ),
            )),
            Some(toml::Value::String(s)) => Model::ALL
                .into_iter()
                .find(|m| m.name() == s)
                .ok_or_else(|| {
                    Located::at(
                        file,
                        text,
                        key_offset(text, "model").unwrap_or(start),
                        format!("model = \"{s}\": unknown model (one of {})", known()),
                    )
                }),
            Some(_) => Err(Located::at(
                file,
                text,
                key_offset(text, "model").unwrap_or(start),
                format!("`model` must be a string, one of {}", known()),
            )),
        }
    }
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The byte offset of top-level `key` in `text` (for an error at its line).
fn key_offset(text: &str, key: &str) -> Option<usize> {
    crate::locate::offset(text, key)
}

/// What every scenario format does first: checks that `text` (named `file`) declares
/// model `want`, and resolves its declared assumptions ([`crate::assume::resolve`]).
/// The result is the text the paper's parser reads, every line where it was.
pub fn open(file: &str, text: &str, want: Model) -> Result<String, Located> {
    expect_model(file, text, want)?;
    Ok(crate::assume::resolve(file, text)?.text)
}

/// A scenario file's `model` key, as every scenario format declares it.
fn expect_model(file: &str, text: &str, want: Model) -> Result<(), Located> {
    let got = Model::of(file, text)?;
    if got == want {
        Ok(())
    } else {
        Err(Located::at(
            file,
            text,
            key_offset(text, "model").unwrap_or(0),
            format!(
                "model = \"{got}\": this is not a {want} scenario (run it with `clusterqos run`, which reads the model)"
            ),
        ))
    }
}

/// How long and with what to run, the same for every experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// Seed of every run (None: each scenario's own, else [`DEFAULT_SEED`]).
    pub seed: Option<u64>,
    /// Reduced run lengths: a quick look (published tolerances still apply).
    pub quick: bool,
    /// Threads to run independent runs on (at least 1; results do not depend on it).
    pub workers: usize,
    /// Threads of each flit network run (`--threads`; flit scenarios): the same result
    /// for every count, which may differ from a run without it in the order of ties
    /// within a cycle ([`qos_sim::flit::Network::set_threads`]).
    pub threads: Option<usize>,
}

/// The seed of a scenario that gives none.
pub const DEFAULT_SEED: u64 = 1;

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: None,
            quick: false,
            workers: 1,
            threads: None,
        }
    }
}

impl RunOptions {
    /// The seed of a scenario whose own is `own`: the override, else its own, else
    /// [`DEFAULT_SEED`].
    pub fn seed_for(&self, own: Option<u64>) -> u64 {
        self.seed.or(own).unwrap_or(DEFAULT_SEED)
    }
}

/// Where an experiment says how far it is: the command draws a bar on a terminal and
/// prints plain lines in a log.
pub trait Progress: Sync {
    /// `total` units of work (runs, points) lie ahead.
    fn plan(&self, total: u64);
    /// One unit finished; `what` names it ("fig5-admission A load 0.7").
    fn done(&self, what: &str);
    /// Inside a long unit: `what` is at `at` of `of` (cycles).
    fn within(&self, _what: &str, _at: u64, _of: u64) {}
}

/// A sink that hears nothing (tests, the Python package's tasks).
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn plan(&self, _: u64) {}
    fn done(&self, _: &str) {}
}

/// Reads a file a scenario names (a topology, a trace), as written in the scenario
/// (relative to it): its name for errors and its text, or why it cannot be read.
pub type ReadFile<'a> = dyn Fn(&str) -> Result<(String, String), String> + Sync + 'a;

/// A reader for scenarios that read no other file (the shipped, embedded ones).
pub fn no_files(path: &str) -> Result<(String, String), String> {
    Err(format!(
        "cannot read {path}: an embedded scenario reads no files (give the scenario as a file to read files beside it)"
    ))
}

/// Reads file `path` as written in scenario file `scenario` (relative to it): its name
/// and text, or why not. The reader every scenario loader is given.
pub fn read_beside(scenario: &str, path: &str) -> Result<(String, String), String> {
    let full = Path::new(scenario)
        .parent()
        .unwrap_or(Path::new(""))
        .join(path);
    let name = full.display().to_string();
    let bytes = std::fs::read(&full).map_err(|e| format!("cannot read {name}: {e}"))?;
    qos_core::source::decode_text(&name, bytes)
        .map(|t| (name.clone(), t))
        .map_err(|e| e.to_string())
}

/// Where a scenario came from: the name of its file and its text (to read its declared
/// assumptions, and to load it again with one of them changed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// Its name in errors: a path, or `scenarios/<model>/<name>.toml` for a shipped one.
    pub file: String,
    /// Its text.
    pub text: String,
    /// Whether it is embedded in the program (it reads no other file) rather than a
    /// file on disk (it reads files beside it).
    pub embedded: bool,
}

impl Source {
    /// Text `text` of file `file` on disk (it reads files beside it).
    pub fn new(file: impl Into<String>, text: impl Into<String>) -> Source {
        Source {
            file: file.into(),
            text: text.into(),
            embedded: false,
        }
    }

    /// Reads a file the scenario names, as its loader is given them.
    pub fn read(&self, path: &str) -> Result<(String, String), String> {
        if self.embedded {
            no_files(path)
        } else {
            read_beside(&self.file, path)
        }
    }
}

/// One paper experiment (or the flit sweeps): what `reproduce` and `run` need of it.
pub trait Experiment: Sync {
    /// A loaded, validated scenario.
    type Scenario: Clone + Send + Sync;
    /// What running a list of scenarios produced.
    type Output: Serialize;

    /// The model its scenario files declare.
    fn model(&self) -> Model;

    /// Title of its report.
    fn title(&self) -> String;

    /// The shipped scenarios, (name, text), in the paper's order.
    fn builtin(&self) -> Vec<(&'static str, &'static str)>;

    /// Parses and validates scenario `text` named `file` (errors at `file:line`);
    /// `read` fetches the files it names.
    fn load(&self, file: &str, text: &str, read: &ReadFile<'_>) -> Result<Self::Scenario, Located>;

    /// A scenario's name.
    fn name<'a>(&self, s: &'a Self::Scenario) -> &'a str;

    /// How many units `simulate` reports done for `scenarios` with `opt` (what it
    /// plans), known before anything runs: a caller that runs several (the main run
    /// and every sensitivity trial) plans them all at once.
    fn units(&self, scenarios: &[Self::Scenario], opt: &RunOptions) -> u64;

    /// Runs `scenarios`; `progress` hears the plan and each unit as it finishes.
    fn simulate(
        &self,
        scenarios: &[Self::Scenario],
        opt: &RunOptions,
        progress: &dyn Progress,
    ) -> Result<Self::Output, Error>;

    /// Every check of `out`, in order.
    fn checks<'a>(&self, out: &'a Self::Output) -> Vec<&'a Check>;

    /// The report of `out` titled `title`.
    fn report(&self, out: &Self::Output, title: &str) -> Report;

    /// Tables printed before the checks (what the checks do not show).
    fn printed(&self, _out: &Self::Output) -> Vec<Table> {
        Vec::new()
    }

    /// Lines printed after the tables (a saturation point).
    fn lines(&self, _out: &Self::Output) -> Vec<String> {
        Vec::new()
    }

    /// The `--json` form of `out`.
    fn json(&self, out: &Self::Output) -> serde_json::Value {
        serde_json::to_value(out).unwrap_or(serde_json::Value::Null)
    }

    /// How fast it ran, for stderr (kept out of the JSON and the report, which depend
    /// only on the scenarios and the seed).
    fn speed(&self, _out: &Self::Output, _opt: &RunOptions) -> Option<String> {
        None
    }

    /// `s` with mechanism `m` switched off in every case that has it, everything else
    /// as it was; None when no case of `s` has it. The mechanism-off tests
    /// (`tests/mechanism_off.rs`) run it and require every ordering or bound crediting
    /// `m` to miss or not be differentiated: a check that passes with its mechanism off
    /// is no evidence for it.
    fn switch_off(&self, _s: &Self::Scenario, _m: Mechanism) -> Option<Self::Scenario> {
        None
    }

    /// `s` cut to what its checks crediting a mechanism need (those checks, the cases
    /// and loads they read), for the mechanism-off tests; None when none of its checks
    /// credits one. Checks credit a mechanism through `[[expect]] mechanism`.
    fn crediting_only(&self, s: &Self::Scenario) -> Option<Self::Scenario> {
        Some(s.clone())
    }

    /// The shipped scenarios' sources (all, or the one named `only`).
    fn builtin_sources(&self, only: Option<&str>) -> Result<Vec<Source>, Error> {
        let all = self.builtin();
        let list: Vec<Source> = all
            .iter()
            .filter(|(n, _)| only.is_none_or(|o| o == *n))
            .map(|(name, text)| Source {
                file: format!("scenarios/{}/{name}.toml", self.model()),
                text: text.to_string(),
                embedded: true,
            })
            .collect();
        if list.is_empty() {
            return Err(Error::Unknown {
                name: only.unwrap_or_default().to_string(),
                known: all.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
            });
        }
        Ok(list)
    }

    /// Loads scenarios from their sources.
    fn load_sources(&self, sources: &[Source]) -> Result<Vec<Self::Scenario>, Error> {
        sources
            .iter()
            .map(|s| {
                self.load(&s.file, &s.text, &|p| s.read(p))
                    .map_err(Error::from)
            })
            .collect()
    }

    /// The shipped scenarios loaded (all, or the one named `only`).
    fn builtin_scenarios(&self, only: Option<&str>) -> Result<Vec<Self::Scenario>, Error> {
        self.load_sources(&self.builtin_sources(only)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_key_is_read_and_its_absence_named_at_a_line() {
        assert_eq!(
            Model::of("a.toml", "model = \"yum\"\nname = \"x\"\n").unwrap(),
            Model::Yum
        );
        let e = Model::of("a.toml", "name = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("a.toml:1:") && e.contains("missing key `model`"),
            "{e}"
        );
        assert!(
            e.contains("\"gulati\" | \"flit\" | \"yum\" | \"nagar\""),
            "{e}"
        );
        let e = Model::of("a.toml", "name = \"x\"\nmodel = \"booksim\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("a.toml:2:") && e.contains("unknown model"),
            "{e}"
        );
        let e = Model::of("a.toml", "name = \n").unwrap_err().to_string();
        assert!(e.starts_with("a.toml:1"), "{e}");
        assert!(!e.contains('\n'));
        let e = expect_model("a.toml", "model = \"flit\"\n", Model::Yum)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a yum scenario"), "{e}");
    }

    #[test]
    fn a_seed_override_wins_over_the_scenario_and_the_default() {
        let o = RunOptions::default();
        assert_eq!(o.seed_for(None), DEFAULT_SEED);
        assert_eq!(o.seed_for(Some(4)), 4);
        let o = RunOptions { seed: Some(9), ..o };
        assert_eq!(o.seed_for(Some(4)), 9);
    }
}
