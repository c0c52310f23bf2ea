// What most tests need, from one place: the service (in this process or as its own), its processes, its API, its
// streams and the stand-ins' scenarios. Redis, npm-installed tools and the real agent CLIs have modules of their own.
export * from './app.js'
export * from './api.js'
export * from './processes.js'
export * from './root.js'
export * from './scenarios.js'
export * from './streams.js'
