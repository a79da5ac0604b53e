//! Line-based extraction of code declarations, per language (chosen by file extension).
//!
//! Deliberately pattern-based rather than parser-based: one regex pass per line is fast enough
//! to run on every refresh over a whole workspace, needs no grammar per language, and tolerates
//! files that do not compile. It finds declarations that start a line; it misses exotic layouts
//! (a name on the line after its keyword) and can report a look-alike inside a multi-line string.

use std::sync::LazyLock;

use regex::Regex;

/// Longest signature kept, in characters.
const MAX_SIGNATURE_CHARS: usize = 300;

/// One declaration found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declaration {
    /// The declared name (for an `impl`, the implementing type).
    pub name: String,
    /// Normalised kind: see [`KINDS`].
    pub kind: &'static str,
    /// 1-based line number.
    pub line: u32,
    /// The trimmed declaration line.
    pub signature: String,
}

/// Every kind [`extract`] can report.
pub const KINDS: &[&str] = &[
    "function",
    "method",
    "struct",
    "enum",
    "trait",
    "type",
    "module",
    "const",
    "static",
    "macro",
    "impl",
    "class",
    "interface",
    "union",
    "tool",
    "resource",
];

/// Maps a caller's kind filter (including language keywords such as `fn`, `def`, `func`, `mod`)
/// to the normalised kind; `None` for a kind this crate never reports.
pub fn normalize_kind(kind: &str) -> Option<&'static str> {
    let kind = kind.trim().to_ascii_lowercase();
    let normal = match kind.as_str() {
        "fn" | "def" | "func" | "fun" | "function" => "function",
        "mod" | "module" | "namespace" => "module",
        "macro" | "macro_rules" => "macro",
        "class" | "record" | "object" => "class",
        other => return KINDS.iter().copied().find(|k| *k == other),
    };
    Some(normal)
}

#[derive(Clone, Copy)]
enum Lang {
    Rust,
    Python,
    Script,
    Go,
    JvmOrCSharp,
    C,
    Vox,
}

fn language(path: &str) -> Option<Lang> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "rs" => Lang::Rust,
        "py" | "pyi" => Lang::Python,
        "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts" => Lang::Script,
        "go" => Lang::Go,
        "java" | "kt" | "kts" | "cs" => Lang::JvmOrCSharp,
        "c" | "h" | "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Lang::C,
        "vox" => Lang::Vox,
        _ => return None,
    })
}

/// Compiles one of this module's constant patterns (never user input); every pattern is run by
/// the declaration tests, so a typo fails them rather than a user's search.
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("built-in declaration pattern compiles")
}

static RUST_ITEM: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"^\s*(?:pub(?:\s*\([^)]*\))?\s+)?(?:(?:default|async|const|unsafe|extern(?:\s+"[^"]*")?)\s+)*(fn|struct|enum|trait|type|mod|const|static|union)\s+(?:mut\s+)?(r#)?([A-Za-z_][A-Za-z0-9_]*)"#,
    )
});
static RUST_MACRO: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)"));
static RUST_IMPL: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(?:unsafe\s+)?impl\b\s*(.*)$"));

static PY_DEF: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*(?:async\s+)?(def|class)\s+([A-Za-z_][A-Za-z0-9_]*)"));

static JS_FUNCTION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:async\s+)?function\b\s*\*?\s*([A-Za-z_$][\w$]*)",
    )
});
static JS_CLASS_LIKE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:const\s+)?(class|interface|enum)\s+([A-Za-z_$][\w$]*)",
    )
});
static JS_TYPE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\s*(?:export\s+)?(?:declare\s+)?type\s+([A-Za-z_$][\w$]*)\s*(?:<.*>)?\s*=")
});
static JS_ARROW: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=]+)?=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]+)?=>|[A-Za-z_$][\w$]*\s*=>)",
    )
});

static GO_FUNC: LazyLock<Regex> =
    LazyLock::new(|| re(r"^func\s+(\([^)]*\)\s*)?([A-Za-z_][A-Za-z0-9_]*)"));
static GO_TYPE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^type\s+([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\s+(struct|interface)?"));

static JVM_TYPE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:(?:public|private|protected|internal|static|final|abstract|sealed|partial|open|data|inner|enum|annotation|value|readonly|unsafe|new|file)\s+)*(class|interface|enum|record|struct|object)\s+([A-Za-z_][A-Za-z0-9_]*)",
    )
});
static KOTLIN_FUN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:(?:public|private|protected|internal|override|open|suspend|inline|abstract|final|operator|infix|tailrec|external)\s+)*fun\s+(?:<[^>]*>\s*)?(?:[A-Za-z_][\w.]*\.)?([A-Za-z_][A-Za-z0-9_]*)\s*\(",
    )
});
static JVM_METHOD: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:(?:public|private|protected|internal|static|final|abstract|synchronized|native|virtual|override|async|sealed|extern|unsafe|new|default|partial)\s+)+(?:<[^>]*>\s*)?(?:[A-Za-z_][\w.]*(?:<[^()]*>)?(?:\[\s*\])*\??\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\([^;=]*$",
    )
});

static C_TYPE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^\s*(?:typedef\s+)?(?:template\s*<[^>]*>\s*)?(struct|class|union|enum)\s+(?:class\s+|struct\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:final\s*)?(?::[^;{]*)?\{?\s*$",
    )
});
static C_FUNCTION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:(?:static|inline|extern|const|unsigned|signed|virtual|constexpr|struct|enum)\s+)*[A-Za-z_][\w:<>,]*(?:\s*[*&]+\s*|\s+)(?:[*&]\s*)*([A-Za-z_~][\w:~]*)\s*\([^;]*$",
    )
});

static VOX_FN: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*(?:pub\s+)?(?:async\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)"));
static VOX_TYPE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*(?:pub\s+)?type\s+([A-Za-z_][A-Za-z0-9_]*)"));
static VOX_INLINE_FN: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:^|\s)fn\s+([A-Za-z_][A-Za-z0-9_]*)\s*\("));
static VOX_DECORATOR: LazyLock<Regex> =
    LazyLock::new(|| re(r"^\s*@(tool|mcp\.tool|mcp\.resource|[A-Za-z_][\w.]*)\b"));

const CONTROL_WORDS: &[&str] = &[
    "if", "for", "while", "switch", "return", "catch", "sizeof", "else", "do", "case", "new",
    "delete", "throw", "using", "typeof", "foreach", "lock", "when", "try",
];

/// Extracts the declarations of a file; empty for an unsupported extension.
pub fn extract(path: &str, text: &str) -> Vec<Declaration> {
    let Some(lang) = language(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // For .vox: the decorator waiting for its `fn` (they may be on different lines).
    let mut pending_decorator: Option<&'static str> = None;
    for (index, line) in text.lines().enumerate() {
        let line_no = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let found = match lang {
            Lang::Rust => rust(line),
            Lang::Python => captures2(&PY_DEF, line)
                .map(|(kw, name)| (name, if kw == "class" { "class" } else { "function" })),
            Lang::Script => script(line),
            Lang::Go => go(line),
            Lang::JvmOrCSharp => jvm(line),
            Lang::C => c_like(line),
            Lang::Vox => vox(line, &mut pending_decorator),
        };
        if let Some((name, kind)) = found {
            out.push(Declaration {
                name,
                kind,
                line: line_no,
                signature: crate::util::truncate_chars(line.trim(), MAX_SIGNATURE_CHARS),
            });
        }
    }
    out
}

fn captures2(regex: &Regex, line: &str) -> Option<(String, String)> {
    let caps = regex.captures(line)?;
    Some((
        caps.get(1)?.as_str().to_string(),
        caps.get(2)?.as_str().to_string(),
    ))
}

fn capture1(regex: &Regex, line: &str) -> Option<String> {
    Some(regex.captures(line)?.get(1)?.as_str().to_string())
}

fn rust(line: &str) -> Option<(String, &'static str)> {
    if let Some(caps) = RUST_ITEM.captures(line) {
        let kind = match caps.get(1)?.as_str() {
            "fn" => "function",
            "struct" => "struct",
            "enum" => "enum",
            "trait" => "trait",
            "type" => "type",
            "mod" => "module",
            "const" => "const",
            "static" => "static",
            _ => "union",
        };
        return Some((caps.get(3)?.as_str().to_string(), kind));
    }
    if let Some(name) = capture1(&RUST_MACRO, line) {
        return Some((name, "macro"));
    }
    let rest = capture1(&RUST_IMPL, line)?;
    Some((impl_self_type(&rest)?, "impl"))
}

/// The implementing type's name from what follows `impl`: `<T> fmt::Display for Wrapper<T> {`
/// gives `Wrapper`.
fn impl_self_type(rest: &str) -> Option<String> {
    let rest = skip_generics(rest.trim_start());
    // Split on a top-level ` for ` (not one inside `<...>` as in `impl<F: for<'a> Fn>`).
    let mut depth = 0i32;
    let mut target = rest;
    for (i, c) in rest.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ if depth == 0 && rest[i..].starts_with(" for ") => {
                target = &rest[i + 5..];
                break;
            }
            _ => {}
        }
    }
    let target = target
        .trim_start()
        .trim_start_matches(['&', '!', '(', '*'])
        .trim_start_matches("mut ")
        .trim_start_matches("dyn ")
        .trim_start();
    let path: String = target
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let name = path.rsplit("::").next().unwrap_or_default();
    (!name.is_empty()).then(|| name.to_string())
}

/// Skips a leading balanced `<...>` (generic parameters).
fn skip_generics(text: &str) -> &str {
    if !text.starts_with('<') {
        return text;
    }
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth -= 1;
                if depth == 0 {
                    return text.get(i + 1..).unwrap_or_default();
                }
            }
            _ => {}
        }
    }
    ""
}

fn script(line: &str) -> Option<(String, &'static str)> {
    if let Some(name) = capture1(&JS_FUNCTION, line) {
        return Some((name, "function"));
    }
    if let Some((kw, name)) = captures2(&JS_CLASS_LIKE, line) {
        let kind = match kw.as_str() {
            "class" => "class",
            "interface" => "interface",
            _ => "enum",
        };
        return Some((name, kind));
    }
    if let Some(name) = capture1(&JS_TYPE, line) {
        return Some((name, "type"));
    }
    capture1(&JS_ARROW, line).map(|name| (name, "function"))
}

fn go(line: &str) -> Option<(String, &'static str)> {
    if let Some(caps) = GO_FUNC.captures(line) {
        let kind = if caps.get(1).is_some() {
            "method"
        } else {
            "function"
        };
        return Some((caps.get(2)?.as_str().to_string(), kind));
    }
    let caps = GO_TYPE.captures(line)?;
    let kind = match caps.get(2).map(|m| m.as_str()) {
        Some("struct") => "struct",
        Some("interface") => "interface",
        _ => "type",
    };
    Some((caps.get(1)?.as_str().to_string(), kind))
}

fn jvm(line: &str) -> Option<(String, &'static str)> {
    if let Some((kw, name)) = captures2(&JVM_TYPE, line) {
        let kind = match kw.as_str() {
            "interface" => "interface",
            "enum" => "enum",
            "struct" => "struct",
            _ => "class",
        };
        return Some((name, kind));
    }
    if let Some(name) = capture1(&KOTLIN_FUN, line) {
        return Some((name, "function"));
    }
    let name = capture1(&JVM_METHOD, line)?;
    (!CONTROL_WORDS.contains(&name.as_str())).then_some((name, "method"))
}

fn c_like(line: &str) -> Option<(String, &'static str)> {
    if let Some((kw, name)) = captures2(&C_TYPE, line) {
        let kind = match kw.as_str() {
            "struct" => "struct",
            "class" => "class",
            "union" => "union",
            _ => "enum",
        };
        return Some((name, kind));
    }
    let name = capture1(&C_FUNCTION, line)?;
    let first_word = line.split_whitespace().next().unwrap_or_default();
    let is_statement = CONTROL_WORDS.contains(&name.as_str())
        || CONTROL_WORDS.contains(&first_word)
        || matches!(first_word, "typedef" | "#define" | "#include");
    (!is_statement).then_some((name, "function"))
}

fn vox(line: &str, pending: &mut Option<&'static str>) -> Option<(String, &'static str)> {
    let trimmed = line.trim_start();
    if trimmed.is_empty() || trimmed.starts_with("//") || trimmed.starts_with('#') {
        return None; // blank lines and comments may sit between a decorator and its fn
    }
    if let Some(decorator) = capture1(&VOX_DECORATOR, line) {
        let kind = match decorator.as_str() {
            "tool" | "mcp.tool" => Some("tool"),
            "mcp.resource" => Some("resource"),
            _ => None,
        };
        // Keep the strongest decorator seen so far (`@tool` above `@test` still makes a tool).
        if kind.is_some() {
            *pending = kind;
        } else if pending.is_none() {
            *pending = Some("function");
        }
        // `@tool fn name(...)` on one line: look past the decorator and its description.
        return VOX_INLINE_FN.captures(line).and_then(|caps| {
            let kind = pending.take().unwrap_or("function");
            Some((caps.get(1)?.as_str().to_string(), kind))
        });
    }
    let decorated = pending.take();
    if let Some(name) = capture1(&VOX_FN, line) {
        return Some((name, decorated.unwrap_or("function")));
    }
    capture1(&VOX_TYPE, line).map(|name| (name, "type"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(path: &str, text: &str) -> Vec<(String, &'static str, u32)> {
        extract(path, text)
            .into_iter()
            .map(|d| (d.name, d.kind, d.line))
            .collect()
    }

    fn pairs(path: &str, text: &str) -> Vec<(String, &'static str)> {
        found(path, text)
            .into_iter()
            .map(|(n, k, _)| (n, k))
            .collect()
    }

    fn p(items: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
        items.iter().map(|(n, k)| (n.to_string(), *k)).collect()
    }

    #[test]
    fn rust_items_of_every_kind_are_found() {
        let src = r#"
pub fn top() {}
pub(crate) async unsafe fn modifiers() {}
const fn const_fn() {}
pub extern "C" fn ffi() {}
struct Point { x: i32 }
pub enum Shape {}
pub trait Draw {}
type Alias = u8;
pub mod nested {}
pub const LIMIT: usize = 3;
static mut COUNTER: u32 = 0;
macro_rules! my_macro { () => {} }
impl<T: Into<Vec<u8>>> fmt::Display for Wrapper<T> {}
impl Point {
    pub fn method(&self) {}
}
// fn commented_out() {}
let not_a_decl = fn_call();
"#;
        assert_eq!(
            pairs("a.rs", src),
            p(&[
                ("top", "function"),
                ("modifiers", "function"),
                ("const_fn", "function"),
                ("ffi", "function"),
                ("Point", "struct"),
                ("Shape", "enum"),
                ("Draw", "trait"),
                ("Alias", "type"),
                ("nested", "module"),
                ("LIMIT", "const"),
                ("COUNTER", "static"),
                ("my_macro", "macro"),
                ("Wrapper", "impl"),
                ("Point", "impl"),
                ("method", "function"),
            ])
        );
    }

    #[test]
    fn declaration_lines_and_signatures_are_reported() {
        let decls = extract("lib.rs", "\n\n    pub fn third(x: u8) -> u8 {   \n");
        assert_eq!(decls.len(), 1);
        assert_eq!(decls[0].line, 3);
        assert_eq!(decls[0].signature, "pub fn third(x: u8) -> u8 {");
    }

    #[test]
    fn python_defs_and_classes_are_found() {
        let src = "class Greeter:\n    def greet(self):\n        pass\nasync def fetch():\n    x = 'def not_this'\n";
        assert_eq!(
            pairs("m.py", src),
            p(&[
                ("Greeter", "class"),
                ("greet", "function"),
                ("fetch", "function")
            ])
        );
    }

    #[test]
    fn javascript_and_typescript_declarations_are_found() {
        let src = r#"export function render() {}
async function* stream() {}
export default class Widget extends Base {}
export interface Props { a: string }
export type Id = string | number;
type Pair<A, B> = [A, B];
export const handler = async (req, res) => {};
const square = x => x * x;
const legacy = function () {};
const notAFunction = 42;
export enum Color { Red }
"#;
        assert_eq!(
            pairs("a.ts", src),
            p(&[
                ("render", "function"),
                ("stream", "function"),
                ("Widget", "class"),
                ("Props", "interface"),
                ("Id", "type"),
                ("Pair", "type"),
                ("handler", "function"),
                ("square", "function"),
                ("legacy", "function"),
                ("Color", "enum"),
            ])
        );
        assert_eq!(
            pairs("a.jsx", "function App() {}"),
            p(&[("App", "function")])
        );
    }

    #[test]
    fn go_funcs_methods_and_types_are_found() {
        let src = "package main\nfunc main() {}\nfunc (s *Server) Serve() error {}\ntype Server struct {}\ntype Store interface {}\ntype ID string\n";
        assert_eq!(
            pairs("main.go", src),
            p(&[
                ("main", "function"),
                ("Serve", "method"),
                ("Server", "struct"),
                ("Store", "interface"),
                ("ID", "type"),
            ])
        );
    }

    #[test]
    fn java_kotlin_and_csharp_classes_and_methods_are_found() {
        let java = r#"public class Account {
    private final Map<String, Long> balances = new HashMap<>();
    public Account(String owner) {
    public static List<String> names(int max) {
    private void reset() {
        if (x) {
        return compute(a);
    }
}
interface Ledger {}
public enum Currency { EUR }
"#;
        assert_eq!(
            pairs("Account.java", java),
            p(&[
                ("Account", "class"),
                ("Account", "method"),
                ("names", "method"),
                ("reset", "method"),
                ("Ledger", "interface"),
                ("Currency", "enum"),
            ])
        );
        let kotlin = "data class User(val name: String)\nsuspend fun load(id: Int): User {\nfun String.shout() = uppercase()\nobject Registry\n";
        assert_eq!(
            pairs("User.kt", kotlin),
            p(&[
                ("User", "class"),
                ("load", "function"),
                ("shout", "function"),
                ("Registry", "class"),
            ])
        );
        let csharp = "public sealed partial class Service\n{\n    public async Task<int> RunAsync(CancellationToken ct)\n    internal struct Slot {}\n}\n";
        assert_eq!(
            pairs("Service.cs", csharp),
            p(&[
                ("Service", "class"),
                ("RunAsync", "method"),
                ("Slot", "struct"),
            ])
        );
    }

    #[test]
    fn c_and_cpp_functions_and_structs_are_found() {
        let src = r#"#include <stdio.h>
struct node {
typedef struct list {
struct node *make_node(int value) {
static inline int add(int a, int b)
int prototype_only(void);
int main(int argc, char **argv) {
    if (argc > 1) {
    return add(1, 2);
}
class Engine : public Base {
void Engine::start() {
"#;
        assert_eq!(
            pairs("main.c", src)[..5],
            p(&[
                ("node", "struct"),
                ("list", "struct"),
                ("make_node", "function"),
                ("add", "function"),
                ("main", "function"),
            ])[..]
        );
        assert_eq!(
            pairs("engine.cpp", src)[5..],
            p(&[("Engine", "class"), ("Engine::start", "function")])[..]
        );
    }

    #[test]
    fn vox_fns_types_and_decorated_tools_are_found() {
        let src = r#"// a comment
type Greeting { text: str }
type Shape = | Circle(r: float) | Square

@tool "greet: say hello"

fn greet(name: str) to str {
    "Hello {name}"
}
@tool fn inline_tool() { 1 }
@mcp.resource("vox://readme", "the readme")
fn readme() to str { "hi" }
@test fn checks() { }
pub fn helper() { }
"#;
        assert_eq!(
            found("tools.vox", src),
            vec![
                ("Greeting".to_string(), "type", 2),
                ("Shape".to_string(), "type", 3),
                ("greet".to_string(), "tool", 7),
                ("inline_tool".to_string(), "tool", 10),
                ("readme".to_string(), "resource", 12),
                ("checks".to_string(), "function", 13),
                ("helper".to_string(), "function", 14),
            ]
        );
    }

    #[test]
    fn unsupported_extensions_yield_nothing() {
        assert!(extract("notes.md", "fn looks_like_rust() {}").is_empty());
        assert!(extract("Makefile", "fn x() {}").is_empty());
    }

    #[test]
    fn kind_aliases_normalise_and_unknown_kinds_are_rejected() {
        assert_eq!(normalize_kind("fn"), Some("function"));
        assert_eq!(normalize_kind("DEF"), Some("function"));
        assert_eq!(normalize_kind("mod"), Some("module"));
        assert_eq!(normalize_kind("tool"), Some("tool"));
        assert_eq!(normalize_kind("gadget"), None);
    }
}
