export {
  ClusterRouteSchema,
  ROUTE_TABLE_SCHEMA_VERSION,
  RouteTableSchema,
  type ClusterRoute,
  type RouteTable,
} from './route-table.js';
