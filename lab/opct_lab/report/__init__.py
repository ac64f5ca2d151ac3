"""A study's pooled report, the levels' dose-response trend and RL's Razor."""
