//go:build !canary_watchdrops

package node

// canaryWatchDrops is set only by the `canary_watchdrops` build tag, which
// exists solely so the robustness suite's own tests can prove that its
// check catches this deliberately broken build: Watch leaves out the
// events of every log index divisible by 37 (breaks W4's watch of every
// committed outcome). Never set it in a build that serves requests.
const canaryWatchDrops = false
