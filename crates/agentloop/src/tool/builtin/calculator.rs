//! `calculator`: evaluates an arithmetic expression exactly as written, so the model does not
//! do arithmetic in its head.

use crate::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::Deserialize;

/// Evaluates arithmetic expressions: `+ - * / % ^`, parentheses, unary minus, decimals, and
/// `sqrt(x)`, `abs(x)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

/// Builds [`EXPRESSION_PATTERN`]: a term is a number or a group of the next level down.
macro_rules! expression_pattern {
    () => {
        concat!("^ ?", level3!(), " ?$")
    };
}
macro_rules! number {
    () => {
        r"[0-9]{1,15}(?:\.[0-9]{1,6})?"
    };
}
macro_rules! operator {
    () => {
        r" ?(?:\*\*|[+*/%^-]) ?"
    };
}
macro_rules! level0 {
    () => {
        concat!("-?", number!(), "(?:", operator!(), "-?", number!(), ")*")
    };
}
macro_rules! term {
    ($inner:expr) => {
        concat!("-?(?:", number!(), r"|(?:sqrt|abs)?\( ?", $inner, r" ?\))")
    };
}
macro_rules! level {
    ($inner:expr) => {
        concat!(term!($inner), "(?:", operator!(), term!($inner), ")*")
    };
}
macro_rules! level3 {
    () => {
        level!(level!(level!(level0!())))
    };
}
/// What an expression may contain (the arguments' schema pattern): numbers (at most 15
/// digits, and 6 after the point: a small model otherwise writes a 120-digit number) and operators
/// (`+ - * / % ^ **`) alternating, single spaces around operators, a minus sign before a
/// term, and parentheses (or `sqrt(`, `abs(`) balanced, nested at most three deep — so a
/// constrained model can neither leave an operator dangling nor a parenthesis open.
pub const EXPRESSION_PATTERN: &str = expression_pattern!();

/// Arguments of [`Calculator`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CalculatorArgs {
    /// The expression, e.g. `17 * 23` or `(2 + 3) ^ 2 / 4`.
    // The schema says what the parser takes (numbers, operators, parentheses, `sqrt(` and
    // `abs(`, single spaces) and how long it may be, so that a constrained model cannot write
    // anything else.
    #[schemars(length(min = 1, max = 120), regex(pattern = EXPRESSION_PATTERN))]
    pub expression: String,
}

impl Tool for Calculator {
    const NAME: &'static str = "calculator";
    type Args = CalculatorArgs;
    type Output = serde_json::Number;
    type Error = String;

    fn description(&self) -> String {
        "Evaluate an arithmetic expression (+ - * / % ^ or **, parentheses, sqrt(), abs()) and return the number.".into()
    }

    /// A pure function: a call left in flight by a crash runs again.
    fn safe_to_retry(&self) -> bool {
        true
    }

    async fn call(
        &self,
        args: CalculatorArgs,
        _ctx: ToolContext,
    ) -> Result<serde_json::Number, String> {
        number(evaluate(&args.expression)?)
    }
}

/// The result as JSON: a whole number without a fraction (`391`, not `391.0`), exactly
/// representable ones only; anything else as a float.
pub fn number(value: f64) -> Result<serde_json::Number, String> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value.fract() == 0.0 && value.abs() <= EXACT {
        return Ok(serde_json::Number::from(value as i64));
    }
    serde_json::Number::from_f64(value)
        .ok_or_else(|| format!("the result {value} is not a finite number"))
}

/// Evaluates an expression; errors say where it went wrong.
pub fn evaluate(expression: &str) -> Result<f64, String> {
    let mut parser = Parser { chars: expression.chars().collect(), pos: 0 };
    let value = parser.sum()?;
    parser.skip_space();
    if parser.pos < parser.chars.len() {
        return Err(format!(
            "unexpected '{}' at position {}",
            parser.chars[parser.pos],
            parser.pos + 1
        ));
    }
    if value.is_finite() {
        Ok(value)
    } else {
        Err("the result is not a finite number".into())
    }
}

/// A recursive-descent parser: sum := product (('+'|'-') product)*; product := power
/// (('*'|'/'|'%') power)*; power := unary ('^' power)?; unary := '-' unary | atom.
struct Parser {
    chars: Vec<char>,
    pos: usize,
}

/// Nesting deeper than this is refused (no stack overflow on hostile input).
const MAX_DEPTH: usize = 64;

impl Parser {
    fn skip_space(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.chars.get(self.pos).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        self.sum_at(0)
    }

    fn sum_at(&mut self, depth: usize) -> Result<f64, String> {
        if depth > MAX_DEPTH {
            return Err("the expression is nested too deeply".into());
        }
        let mut value = self.product(depth)?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            let rhs = self.product(depth)?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn product(&mut self, depth: usize) -> Result<f64, String> {
        let mut value = self.power(depth)?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek() {
            self.pos += 1;
            let rhs = self.power(depth)?;
            value = match op {
                '*' => value * rhs,
                _ if rhs == 0.0 => return Err("division by zero".into()),
                '/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    fn power(&mut self, depth: usize) -> Result<f64, String> {
        let base = self.unary(depth)?;
        // `^`, or `**` as many languages write it.
        let double_star = self.peek() == Some('*') && self.chars.get(self.pos + 1) == Some(&'*');
        if self.peek() == Some('^') || double_star {
            self.pos += if double_star { 2 } else { 1 };
            let exponent = self.power(depth + 1)?;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn unary(&mut self, depth: usize) -> Result<f64, String> {
        if depth > MAX_DEPTH {
            return Err("the expression is nested too deeply".into());
        }
        match self.peek() {
            Some('-') => {
                self.pos += 1;
                Ok(-self.unary(depth + 1)?)
            }
            Some('+') => {
                self.pos += 1;
                self.unary(depth + 1)
            }
            _ => self.atom(depth),
        }
    }

    fn atom(&mut self, depth: usize) -> Result<f64, String> {
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let value = self.sum_at(depth + 1)?;
                if self.peek() != Some(')') {
                    return Err(format!("expected ')' at position {}", self.pos + 1));
                }
                self.pos += 1;
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.pos;
                while self
                    .chars
                    .get(self.pos)
                    .is_some_and(|c| c.is_ascii_digit() || *c == '.' || *c == '_')
                {
                    self.pos += 1;
                }
                let text: String =
                    self.chars[start..self.pos].iter().filter(|c| **c != '_').collect();
                text.parse::<f64>().map_err(|_| format!("'{text}' is not a number"))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.pos;
                while self.chars.get(self.pos).is_some_and(char::is_ascii_alphabetic) {
                    self.pos += 1;
                }
                let name: String = self.chars[start..self.pos].iter().collect();
                let argument = self.atom(depth + 1)?;
                match name.as_str() {
                    "sqrt" if argument < 0.0 => Err("sqrt of a negative number".into()),
                    "sqrt" => Ok(argument.sqrt()),
                    "abs" => Ok(argument.abs()),
                    other => Err(format!("unknown function '{other}'")),
                }
            }
            Some(c) => Err(format!("unexpected '{c}' at position {}", self.pos + 1)),
            None => Err("the expression ended too early".into()),
        }
    }
}
