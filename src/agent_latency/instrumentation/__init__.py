"""One instrumentor per target (OpenTelemetry ``BaseInstrumentor``s with matched wrap/unwrap)."""
