// Command zerolayer is the one binary of zerolayer: the services (worker,
// gateway, billing, and dev, all of them in one process) and the tools
// around them (submit, batch, report, pricebook, tags, tenants, keys,
// migrate, models, gen, bench).
//
// The command holds no policy: it parses flags and environment variables
// into the configs of the packages that do the work (worker.OpenModels,
// ops/devstack, billing, producer, gpu/device) and wires them; it may import
// any package of the module, and nothing imports it.
package main
