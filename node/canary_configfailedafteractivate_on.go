//go:build canary_configfailedafteractivate

package node

// canaryConfigFailedAfterActivate is set only by the
// `canary_configfailedafteractivate` build tag, which exists solely so the
// robustness suite's own tests can prove that its W5 check catches this
// deliberately broken build: a configuration change whose activation
// committed is answered FAILED (breaks W5: a change reported failed never
// activates). Never set it in a build that serves requests.
const canaryConfigFailedAfterActivate = true
