//! Pass/fail rules over a result's figures: `--fail-on EXPR`, like k6's
//! thresholds. Pure: a rule is parsed once, checked against a sample of
//! the result's shape before anything runs (so a typo costs no run), and
//! evaluated against the result the command wrote.
//!
//! ## Grammar
//!
//! `PATH OP VALUE`, where
//! - `PATH` is a dotted path into the result's JSON (`failed_sessions_pct`,
//!   `latency_from_schedule_ms.p99`, `players.rebuffered_sessions`,
//!   `classes.dsl.failed_sessions_pct`); a section with an `overall`
//!   object reads through it (`players.rebuffer_events` is
//!   `players.overall.rebuffer_events`); a few names are aliases
//!   ([`ALIASES`]: `client_valid` is `valid`, …);
//! - `OP` is one of `>`, `>=`, `<`, `<=`, `==`, `!=`;
//! - `VALUE` is a number or `true`/`false`.
//!
//! The rule says when the result **fails**: `failed_sessions_pct>1` fails a
//! run in which more than 1 % of the measured sessions failed. A figure
//! the result leaves empty (`null`: no rate passed, so no capacity) fails
//! every rule on it: the check cannot pass without a value.

use std::fmt;

use serde_json::Value;

/// Names accepted in place of a path of the result (`alias`, `path`).
pub const ALIASES: [(&str, &str); 3] = [
    ("client_valid", "valid"),
    ("failed_pct", "failed_sessions_pct"),
    ("p99_latency_ms", "latency_from_schedule_ms.p99"),
];

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    fn symbol(self) -> &'static str {
        match self {
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
}

/// The right-hand side of a rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// A number.
    Number(f64),
    /// `true` or `false`.
    Bool(bool),
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Number(x) => write!(f, "{x}"),
            Bound::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// One `--fail-on` rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// As the user wrote it.
    pub text: String,
    /// The path after aliases, split at dots.
    pub path: Vec<String>,
    /// The comparison.
    pub op: Op,
    /// What the figure is compared with.
    pub bound: Bound,
}

/// Why a rule could not be parsed or checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// Not `PATH OP VALUE`.
    #[error("--fail-on `{0}`: expected PATH OP VALUE, e.g. `failed_sessions_pct>1` or `latency_from_schedule_ms.p99>500` (OP: > >= < <= == !=)")]
    Syntax(String),
    /// The value is neither a number nor a boolean.
    #[error("--fail-on `{0}`: `{1}` is not a number, true or false")]
    Value(String, String),
    /// The path names nothing in the result.
    #[error("--fail-on `{rule}`: the result has no figure `{path}`{hint}")]
    UnknownPath {
        /// The rule.
        rule: String,
        /// The path, dotted.
        path: String,
        /// Where the path went wrong, with the names that exist there.
        hint: String,
    },
    /// The path names a section, not a number or a boolean.
    #[error("--fail-on `{rule}`: `{path}` is not a number or a boolean (it holds {kind}); name one figure, e.g. `{path}.{example}`")]
    NotAFigure {
        /// The rule.
        rule: String,
        /// The path, dotted.
        path: String,
        /// What it holds.
        kind: &'static str,
        /// A key below it.
        example: String,
    },
    /// A boolean figure compared with an order, or a number with a boolean.
    #[error("--fail-on `{0}`: compare a boolean only with == or != and true/false, a number only with a number")]
    Mismatch(String),
}

impl std::str::FromStr for Rule {
    type Err = RuleError;
    fn from_str(s: &str) -> Result<Self, RuleError> {
        Rule::parse(s)
    }
}

impl Rule {
    /// Parses `PATH OP VALUE` (spaces around the parts are allowed).
    pub fn parse(text: &str) -> Result<Rule, RuleError> {
        let syntax = || RuleError::Syntax(text.to_string());
        let at = text.find(['<', '>', '=', '!']).ok_or_else(syntax)?;
        let (lhs, rest) = text.split_at(at);
        let (op, rhs) = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ]
        .iter()
        .find_map(|(sym, op)| rest.strip_prefix(sym).map(|r| (*op, r)))
        .ok_or_else(syntax)?;
        let lhs = lhs.trim();
        let rhs = rhs.trim();
        let good = |seg: &str| {
            !seg.is_empty()
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if lhs.is_empty() || rhs.is_empty() || !lhs.split('.').all(good) {
            return Err(syntax());
        }
        let lhs = ALIASES
            .iter()
            .find(|(a, _)| *a == lhs)
            .map_or(lhs, |(_, p)| p);
        let bound = match rhs {
            "true" => Bound::Bool(true),
            "false" => Bound::Bool(false),
            n => match n.parse::<f64>() {
                Ok(x) if x.is_finite() => Bound::Number(x),
                _ => return Err(RuleError::Value(text.to_string(), n.to_string())),
            },
        };
        if matches!(bound, Bound::Bool(_)) && !matches!(op, Op::Eq | Op::Ne) {
            return Err(RuleError::Mismatch(text.to_string()));
        }
        Ok(Rule {
            text: text.trim().to_string(),
            path: lhs.split('.').map(str::to_string).collect(),
            op,
            bound,
        })
    }

    /// The figure the rule reads from `result`.
    fn lookup<'v>(&self, result: &'v Value) -> Result<&'v Value, RuleError> {
        let mut v = result;
        for (i, seg) in self.path.iter().enumerate() {
            // `players.rebuffer_events` is `players.overall.rebuffer_events`
            let through_overall = v.get("overall").and_then(|o| o.get(seg));
            match v.get(seg).or(through_overall) {
                Some(next) => v = next,
                None => {
                    let here = if i == 0 {
                        "the top level".to_string()
                    } else {
                        format!("`{}`", self.path[..i].join("."))
                    };
                    let names: Vec<&str> = v
                        .as_object()
                        .map(|o| o.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    let hint = if names.is_empty() {
                        format!(" ({here} holds no named figures)")
                    } else {
                        format!("; {here} has: {}", names.join(", "))
                    };
                    return Err(RuleError::UnknownPath {
                        rule: self.text.clone(),
                        // up to the name that is not there
                        path: self.path[..=i].join("."),
                        hint,
                    });
                }
            }
        }
        Ok(v)
    }

    /// Checks that the rule names a figure of the right type in `sample`, a
    /// result of the same shape (run before the measurement, so a typo is a
    /// usage error, not a wasted run).
    pub fn check_against(&self, sample: &Value) -> Result<(), RuleError> {
        let v = self.lookup(sample)?;
        let path = self.path.join(".");
        match (v, self.bound) {
            // a figure that is absent until the run gives it (a capacity
            // before any point passed)
            (Value::Null, _) => Ok(()),
            (Value::Number(_), Bound::Number(_)) | (Value::Bool(_), Bound::Bool(_)) => Ok(()),
            (Value::Number(_), Bound::Bool(_)) | (Value::Bool(_), Bound::Number(_)) => {
                Err(RuleError::Mismatch(self.text.clone()))
            }
            (Value::Object(o), _) => Err(RuleError::NotAFigure {
                rule: self.text.clone(),
                path,
                kind: "named figures",
                example: o.keys().next().cloned().unwrap_or_default(),
            }),
            (other, _) => Err(RuleError::NotAFigure {
                rule: self.text.clone(),
                path,
                kind: match other {
                    Value::Array(_) => "a list",
                    Value::String(_) => "text",
                    _ => "nothing",
                },
                example: String::new(),
            }),
        }
    }

    /// Evaluates the rule: `Ok(Some(breach))` when `result` fails it,
    /// `Ok(None)` when it passes.
    pub fn evaluate(&self, result: &Value) -> Result<Option<Breach>, RuleError> {
        let v = self.lookup(result)?;
        let failed = match (v, self.bound) {
            // no figure to judge (no rate passed, say): the check cannot pass
            (Value::Null, _) => true,
            (Value::Number(n), Bound::Number(b)) => {
                let x = n.as_f64().unwrap_or(f64::NAN);
                match self.op {
                    Op::Gt => x > b,
                    Op::Ge => x >= b,
                    Op::Lt => x < b,
                    Op::Le => x <= b,
                    Op::Eq => x == b,
                    Op::Ne => x != b,
                }
            }
            (Value::Bool(x), Bound::Bool(b)) => match self.op {
                Op::Eq => *x == b,
                Op::Ne => *x != b,
                _ => return Err(RuleError::Mismatch(self.text.clone())),
            },
            _ => {
                self.check_against(result)?;
                return Err(RuleError::Mismatch(self.text.clone()));
            }
        };
        Ok(failed.then(|| Breach {
            rule: self.text.clone(),
            actual: match v {
                Value::Null => "absent".to_string(),
                Value::Number(n) => n.to_string(),
                other => other.to_string(),
            },
        }))
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}{}",
            self.path.join("."),
            self.op.symbol(),
            self.bound
        )
    }
}

/// A rule the result failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// The rule as written.
    pub rule: String,
    /// The figure's value in the result.
    pub actual: String,
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--fail-on {}: breached (the figure is {})",
            self.rule, self.actual
        )
    }
}

/// Checks every rule against `shape`, a result of the same shape, before
/// the run: a rule whose first name is one of `after_the_run` (a section
/// whose names the run decides, such as the client classes) is left for
/// [`evaluate_all`]; every other rule must name a figure of `shape`.
pub fn check_before(
    rules: &[Rule],
    shape: &Value,
    after_the_run: &[&str],
) -> Result<(), RuleError> {
    rules
        .iter()
        .filter(|r| !after_the_run.contains(&r.path[0].as_str()))
        .try_for_each(|r| r.check_against(shape))
}

/// Evaluates every rule; the breaches, in rule order.
pub fn evaluate_all(rules: &[Rule], result: &Value) -> Result<Vec<Breach>, RuleError> {
    let mut out = Vec::new();
    for r in rules {
        if let Some(b) = r.evaluate(result)? {
            out.push(b);
        }
    }
    Ok(out)
}

/// The `--fail-on` flag's help, shared by run, capacity and compare.
pub const FAIL_ON_HELP: &str = "Fail (exit 1) when the result's figure compares so: PATH OP VALUE, \
e.g. `failed_sessions_pct>1`, `latency_from_schedule_ms.p99>500`, `players.rebuffered_sessions>0`, \
`client_valid==false`; OP is > >= < <= == !=; repeatable; checked before the run (a typo is a usage \
error) and named on stderr when breached (the results are written either way)";

/// Parses one `--fail-on` value (for clap's `value_parser`).
pub fn parse_rule(s: &str) -> Result<Rule, String> {
    Rule::parse(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result() -> Value {
        json!({
            "failed_sessions_pct": 2.5,
            "valid": true,
            "latency_from_schedule_ms": { "p99": 480.0, "p50": 12.0 },
            "classes": { "dsl": { "failed_sessions_pct": 0.0 } },
            "players": { "overall": { "rebuffer_events": 3 }, "abr": "bola" },
            "intervals": [],
            "target": "http://x",
        })
    }

    #[test]
    fn rules_fail_exactly_when_their_comparison_holds() {
        let r = result();
        let fails = |s: &str| Rule::parse(s).unwrap().evaluate(&r).unwrap().is_some();
        assert!(fails("failed_sessions_pct>1"));
        assert!(!fails("failed_sessions_pct>2.5"));
        assert!(fails("failed_sessions_pct>=2.5"));
        assert!(!fails("latency_from_schedule_ms.p99>500"));
        assert!(fails("latency_from_schedule_ms.p99 > 400"));
        assert!(fails("latency_from_schedule_ms.p50<=12"));
        assert!(!fails("latency_from_schedule_ms.p50<12"));
        assert!(fails("client_valid==true"));
        assert!(!fails("client_valid==false"));
        assert!(fails("valid!=false"));
        assert!(!fails("classes.dsl.failed_sessions_pct>0"));
        assert!(fails("p99_latency_ms==480"));
        assert!(fails("players.rebuffer_events>2"));
        assert!(!fails("players.overall.rebuffer_events>3"));
        // an absent figure fails any rule on it, and says so
        let none = json!({ "answer": { "capacity": null } });
        let b = Rule::parse("answer.capacity<10").unwrap();
        assert!(b.check_against(&none).is_ok());
        assert_eq!(b.evaluate(&none).unwrap().unwrap().actual, "absent");
        assert!(!fails("failed_pct!=2.5"));
    }

    #[test]
    fn a_breach_names_the_rule_and_the_figure() {
        let b = Rule::parse("failed_sessions_pct>1")
            .unwrap()
            .evaluate(&result())
            .unwrap()
            .unwrap();
        assert_eq!(b.rule, "failed_sessions_pct>1");
        assert_eq!(b.actual, "2.5");
        assert!(b.to_string().contains("breached"));
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        let e = |s: &str| Rule::parse(s).unwrap_err().to_string();
        assert!(e("failed_sessions_pct").contains("expected PATH OP VALUE"));
        assert!(e(">1").contains("expected PATH OP VALUE"));
        assert!(e("a..b>1").contains("expected PATH OP VALUE"));
        assert!(e("failed_sessions_pct=>1").contains("expected PATH OP VALUE"));
        assert!(e("failed_sessions_pct>lots").contains("`lots` is not a number"));
        assert!(e("valid>true").contains("boolean only with == or !="));
        let r = result();
        let c = |s: &str| {
            Rule::parse(s)
                .unwrap()
                .check_against(&r)
                .unwrap_err()
                .to_string()
        };
        let typo = c("failed_session_pct>1");
        assert!(typo.contains("no figure `failed_session_pct`"), "{typo}");
        assert!(typo.contains("failed_sessions_pct"), "{typo}");
        let deep = c("latency_from_schedule_ms.p98>1");
        assert!(
            deep.contains("`latency_from_schedule_ms` has: p99, p50") || deep.contains("p50, p99"),
            "{deep}"
        );
        assert!(c("latency_from_schedule_ms>1").contains("e.g. `latency_from_schedule_ms."));
        assert!(c("intervals>1").contains("a list"));
        assert!(c("valid>1").contains("boolean only"));
        assert!(Rule::parse("failed_sessions_pct>1")
            .unwrap()
            .check_against(&r)
            .is_ok());
        // a section the run decides is checked after it, the rest before
        let rules = [
            Rule::parse("classes.cable.stalls>0").unwrap(),
            Rule::parse("valid==false").unwrap(),
        ];
        assert!(check_before(&rules, &r, &["classes"]).is_ok());
        assert!(check_before(&rules, &r, &[]).is_err());
    }
}
