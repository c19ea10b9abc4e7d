// The board's views, one file per page family under views/; importers may use this index.
export * from './views/layout.ts';
export * from './views/sign-in.ts';
export * from './views/endpoints.ts';
export * from './views/todos.ts';
