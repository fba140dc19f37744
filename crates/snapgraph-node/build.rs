//! Link settings napi-rs needs for a Node addon (`-undefined dynamic_lookup` on macOS).

fn main() {
    napi_build::setup();
}
