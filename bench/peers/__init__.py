"""The peers baton is measured against: a hand-written floor and the official SDK's servers."""
