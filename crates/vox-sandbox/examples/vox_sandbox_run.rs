//! `cargo run -p vox-sandbox --example vox_sandbox_run -- SKILL_DIR CMD [ARGS...]`: runs one
//! command in the sandbox with default limits and prints the outcome.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: vox_sandbox_run SKILL_DIR CMD [ARGS...]");
        std::process::exit(2);
    }
    println!("{:?}", vox_sandbox::probe());
    let req = vox_sandbox::RunRequest {
        skill_dir: std::path::Path::new(&args[0]),
        argv: &args[1..],
        stdin: None,
        limits: vox_sandbox::Limits::default(),
        cancel: None,
    };
    match vox_sandbox::run(&req) {
        Ok(o) => println!("{o:#?}"),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
